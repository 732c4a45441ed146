#!/usr/bin/env python3
"""Bounded soak test of gemma-serve on loopback (driven by scripts/soak.sh).

Runs a real gemma-serve (CPU, API key, limits) under mixed load for
--duration-s seconds: normal streams, clients that disconnect mid-stream,
expired deadlines, streams the server's --request-timeout-s ends, malformed,
oversized and too-long requests, wrong keys and status polls. Checks that every call gets the answer its kind expects, the
server never dies, its RSS stays flat (end vs. after warm-up, within
--rss-growth), and that afterwards nothing runs and the KV pool is full again
(GetServerStatus). Prints a JSON summary last; exit 0 when everything held.
"""
import argparse
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

KEY = "soak-key"
MAX_MESSAGE_BYTES = 64 * 1024
MAX_PROMPT_TOKENS = 200
REQUEST_TIMEOUT_S = 3.0
PROMPTS = [b"Love is", b"The quick brown fox", b"A fortune for you:", b"Never trust"]


def load_stubs(client_path):
    spec = importlib.util.spec_from_file_location("gemma_client", client_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_stubs(module.DEFAULT_PROTO_DIR)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def start_server(args, log_path):
    log = open(log_path, "w")
    server = subprocess.Popen(
        [args.serve, "--model", args.model, "--backend", "cpu", "--host", "127.0.0.1",
         "--port", "0", "--metrics-port", "0", "--threads", str(args.threads),
         "--max-context", "1024", "--max-concurrent-sequences", "8", "--max-queue", "256",
         "--api-key", KEY, "--max-message-bytes", str(MAX_MESSAGE_BYTES),
         "--max-prompt-tokens", str(MAX_PROMPT_TOKENS), "--log-format", "json",
         "--request-timeout-s", str(REQUEST_TIMEOUT_S)],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    addr = metrics = None
    while time.time() < deadline and server.poll() is None:
        with open(log_path) as f:
            for line in f:
                try:
                    msg = json.loads(line).get("msg", "")
                except ValueError:
                    continue
                if msg.startswith("metrics on "):
                    metrics = msg.split()[-1]
                if msg.startswith("listening on "):
                    addr = msg.split()[-1]
        if addr:
            return server, addr, metrics
        time.sleep(0.1)
    server.kill()
    sys.exit("gemma-serve did not start; log: " + log_path)


class Load:
    """One kind of call per method: each returns (ok, detail)."""

    def __init__(self, stub, pb2):
        self.stub, self.pb2 = stub, pb2
        self.auth = [("authorization", f"Bearer {KEY}")]

    def request(self, max_tokens, text=None):
        r = self.pb2.GenerateRequest(text=text or random.choice(PROMPTS))
        r.sampling.temperature = random.choice([0.0, 0.8])
        r.stopping.max_tokens = max_tokens
        r.stopping.ignore_eos = True
        return r

    def expect_error(self, request, code, metadata=None, timeout=60):
        try:
            for _ in self.stub.Generate(request, metadata=metadata or self.auth, timeout=timeout):
                pass
        except grpc.RpcError as error:
            return error.code() == code, f"{error.code()}: {error.details()}"
        return False, "succeeded"

    def normal(self):
        n = random.randint(4, 32)
        finish = None
        for response in self.stub.Generate(self.request(n), metadata=self.auth, timeout=120):
            if response.HasField("finish"):
                finish = response.finish
        ok = finish is not None and finish.usage.completion_tokens == n
        return ok, f"finish={finish}"

    def disconnect(self):
        call = self.stub.Generate(self.request(400), metadata=self.auth, timeout=120)
        for _ in range(random.randint(1, 3)):
            next(call)
        call.cancel()
        try:
            for _ in call:
                pass
        except grpc.RpcError as error:
            return error.code() == grpc.StatusCode.CANCELLED, str(error.code())
        return False, "stream went on after cancel"

    def expired_deadline(self):
        return self.expect_error(self.request(500), grpc.StatusCode.DEADLINE_EXCEEDED,
                                 timeout=random.uniform(0.01, 0.2))

    def server_timeout(self):
        """A long stream: the server's --request-timeout-s ends it with
        DEADLINE_EXCEEDED, unless it really finished within the timeout."""
        started = time.time()
        try:
            for _ in self.stub.Generate(self.request(1000), metadata=self.auth, timeout=120):
                pass
        except grpc.RpcError as error:
            elapsed = time.time() - started
            return (error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and
                    elapsed >= REQUEST_TIMEOUT_S * 0.9), f"{error.code()} after {elapsed:.1f} s"
        elapsed = time.time() - started
        return elapsed <= REQUEST_TIMEOUT_S + 1.0, f"finished after {elapsed:.1f} s"

    def malformed(self):
        r = self.request(8)
        choice = random.randrange(4)
        if choice == 0:
            r.sampling.top_p = 1.5
        elif choice == 1:
            r.text = b"\xff\xfe broken utf-8"
        elif choice == 2:
            r.stopping.max_tokens = 0
        else:
            r.ClearField("text")
        return self.expect_error(r, grpc.StatusCode.INVALID_ARGUMENT)

    def oversized(self):
        r = self.request(8, text=b"a" * (MAX_MESSAGE_BYTES + 1024))
        return self.expect_error(r, grpc.StatusCode.RESOURCE_EXHAUSTED)

    def too_long_prompt(self):
        r = self.request(8, text=b" ".join([b"fortune"] * (MAX_PROMPT_TOKENS + 50)))
        return self.expect_error(r, grpc.StatusCode.INVALID_ARGUMENT)

    def wrong_key(self):
        metadata = random.choice([[("authorization", "Bearer nope")], [("x", "y")]])
        return self.expect_error(self.request(8), grpc.StatusCode.UNAUTHENTICATED, metadata)

    def status(self):
        s = self.stub.GetServerStatus(self.pb2.GetServerStatusRequest(), metadata=self.auth,
                                      timeout=10)
        return s.kv_total_blocks > 0, str(s)


KINDS = {"normal": 40, "disconnect": 12, "expired_deadline": 12, "server_timeout": 3,
         "malformed": 10, "oversized": 6, "too_long_prompt": 6, "wrong_key": 8, "status": 6}


def worker(load, deadline, results, lock, seed):
    random.seed(seed)
    names, weights = list(KINDS), list(KINDS.values())
    while time.time() < deadline:
        kind = random.choices(names, weights)[0]
        try:
            ok, detail = getattr(load, kind)()
        except grpc.RpcError as error:
            ok, detail = False, f"{error.code()}: {error.details()}"
        with lock:
            entry = results.setdefault(kind, {"ok": 0, "bad": 0, "examples": []})
            entry["ok" if ok else "bad"] += 1
            if not ok and len(entry["examples"]) < 3:
                entry["examples"].append(detail[:300])


def wait_idle(load, timeout_s=30):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        s = load.stub.GetServerStatus(load.pb2.GetServerStatusRequest(), metadata=load.auth)
        if s.num_requests_running == 0 and s.num_requests_waiting == 0 and \
                s.kv_free_blocks == s.kv_total_blocks:
            return True, s
        time.sleep(0.2)
    return False, s


def run(args, server, addr, metrics):
    pb2, pb2_grpc = load_stubs(args.client)
    channel = grpc.insecure_channel(addr)
    load = Load(pb2_grpc.GemmaStub(channel), pb2)
    summary = {"duration_s": args.duration_s, "workers": args.workers}
    summary["rss_kib_idle"] = rss_kib(server.pid)
    results, lock = {}, threading.Lock()
    started = time.time()
    deadline = started + args.duration_s
    threads = [threading.Thread(target=worker, args=(load, deadline, results, lock, i))
               for i in range(args.workers)]
    for t in threads:
        t.start()
    time.sleep(min(args.warmup_s, args.duration_s / 4))
    summary["rss_kib_start"] = rss_kib(server.pid)
    for t in threads:
        t.join()
    summary["elapsed_s"] = round(time.time() - started, 1)
    summary["alive"] = server.poll() is None
    summary["rss_kib_end"] = rss_kib(server.pid) if summary["alive"] else -1
    idle, status = wait_idle(load)
    summary["idle_after"] = idle
    summary["kv_free_blocks"], summary["kv_total_blocks"] = status.kv_free_blocks, status.kv_total_blocks
    summary["calls"] = results
    if metrics:
        summary["metrics"] = scrape_finishes(metrics.replace("0.0.0.0", "127.0.0.1"))
    return summary


def scrape_finishes(url):
    """The finished-request counters from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gemma_request_success_total":
                out[sample.labels["finished_reason"]] = sample.value
            elif sample.name == "gemma_request_failure_total" and \
                    sample.labels["code"] == "DEADLINE_EXCEEDED":
                out["timeouts"] = sample.value
            elif sample.name == "gemma_generation_tokens_total":
                out["generation_tokens"] = sample.value
    return out


def metrics_problems(summary):
    """Every normal stream ends by length; aborts come only from the
    disconnects and expired deadlines that reached the engine; timeouts only
    from the long streams."""
    m, calls = summary.get("metrics"), summary["calls"]
    if not m:
        return []
    count = lambda kind: calls.get(kind, {}).get("ok", 0)
    problems = []
    # Long streams that beat the server's timeout end by length too.
    if not count("normal") <= m.get("length", 0) <= count("normal") + count("server_timeout"):
        problems.append(f"metrics: {m.get('length')} length finishes for "
                        f"{count('normal')} normal streams")
    if m.get("abort", 0) > count("disconnect") + count("expired_deadline"):
        problems.append(f"metrics: {m.get('abort')} aborts > disconnects + expired deadlines")
    if m.get("timeouts", 0) > count("server_timeout"):
        problems.append(f"metrics: {m.get('timeouts')} server timeouts > long streams")
    return problems


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", required=True)
    parser.add_argument("--model", default=os.path.join(here, "..", "models", "gemma4-fortunes"))
    parser.add_argument("--client", default=os.path.join(here, "..", "clients", "python", "gemma_client.py"))
    parser.add_argument("--duration-s", type=float, default=60)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1, help="server cpu backend threads")
    parser.add_argument("--warmup-s", type=float, default=10)
    parser.add_argument("--rss-growth", type=float, default=0.20)
    args = parser.parse_args()
    log_path = tempfile.mktemp(prefix="gemma-soak-", suffix=".log")
    server, addr, metrics = start_server(args, log_path)
    try:
        summary = run(args, server, addr, metrics)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
    summary["exit_code"] = code
    summary["log"] = log_path
    problems = [f"{k}: {v['bad']} wrong answers" for k, v in summary["calls"].items() if v["bad"]]
    if not summary["alive"] or code != 0:
        problems.append(f"server died or exited {code}")
    if summary["rss_kib_end"] > summary["rss_kib_start"] * (1 + args.rss_growth):
        problems.append("RSS grew more than allowed")
    if not summary["idle_after"]:
        problems.append("not idle / KV pool not full after the load")
    problems += metrics_problems(summary)
    summary["problems"] = problems
    if not problems:
        os.remove(log_path)
    print(json.dumps(summary, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
