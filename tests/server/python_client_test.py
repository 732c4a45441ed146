#!/usr/bin/env python3
"""Runs clients/python/gemma_client.py against a real gemma-serve.

Starts the server on a free loopback port, checks greedy generation against
the golden fixture, info, tokenize, an INVALID_ARGUMENT (exit 1) and bad
arguments (exit 2), then SIGTERMs the server and expects exit code 0.
Prints 'N passed, N failed' last.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

failures = []
passes = 0


def check(name, condition, detail=""):
    global passes
    if condition:
        passes += 1
    else:
        failures.append(name)
        print(f"FAIL {name}: {detail}", file=sys.stderr)


def start_server(args):
    server = subprocess.Popen(
        [args.serve, "--model", args.model, "--backend", "cpu", "--host", "127.0.0.1",
         "--port", "0", "--threads", "1", "--max-context", "1024", "--metrics-port", "-1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    for line in server.stdout:
        match = re.search(r"listening on (\S+)", line)
        if match:
            return server, match.group(1)
        if time.time() > deadline:
            break
    server.kill()
    sys.exit("gemma-serve did not start")


def client(args, addr, *command):
    return subprocess.run([sys.executable, args.client, "--addr", addr, *command],
                          capture_output=True, text=True, timeout=120)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    with open(os.path.join(args.model, "golden.json")) as f:
        golden = json.load(f)["prompts"][0]

    server, addr = start_server(args)
    try:
        run = client(args, addr, "generate", golden["text"], "--max-tokens", "40", "--greedy",
                     "--ignore-eos", "--print-ids")
        check("generate exit 0", run.returncode == 0, run.stderr)
        ids_line = next((l for l in run.stdout.splitlines() if l.startswith("ids:")), "ids:")
        ids = [int(x) for x in ids_line[4:].split()]
        trusted = next((i for i, m in enumerate(golden["margins"]) if m < 0.01),
                       len(golden["margins"]))
        check("greedy ids match golden", ids[:trusted] == golden["greedy"][:trusted],
              f"{ids} vs {golden['greedy']}")
        check("finish reported", "FINISH_REASON_LENGTH" in run.stderr, run.stderr)

        run = client(args, addr, "info")
        check("info", run.returncode == 0 and "gemma4-fortunes" in run.stdout, run.stdout)
        run = client(args, addr, "tokenize", golden["text"], "--add-bos")
        check("tokenize", run.stdout.split() == [str(i) for i in golden["ids"]], run.stdout)
        run = client(args, addr, "chat", "Tell me a fortune", "--greedy", "--max-tokens", "8")
        check("chat", run.returncode == 0, run.stderr)
        run = client(args, addr, "generate", "x", "--top-p", "1.5")
        check("invalid argument exits 1", run.returncode == 1 and "top_p" in run.stderr,
              run.stderr)
        run = client(args, addr, "generate")
        check("bad arguments exit 2", run.returncode == 2, run.stderr)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            code = -1
    check("server exits 0 on SIGTERM", code == 0, f"exit code {code}")
    print(f"{passes} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
