#!/usr/bin/env python3
"""Acceptance check: a gemma-loadgen run against a real gemma-serve while
/metrics is scraped; the counters must match what loadgen sent.

  /usr/bin/python3 scripts/loadgen_metrics_check.py --build-dir build [--num-requests 64]

Starts gemma-serve (CPU, API key, --metrics-port 0), scrapes /metrics before,
during (peaks of running requests and KV usage) and after a loadgen run with
--ignore-eos, and checks: finished_reason="length" grew by the number of
requests, generation tokens by requests x output-len, prompt tokens by
requests x input-len (random prompts: no prefix hits), the latency
histograms by one per request, ITL by requests x (output-len - 1), one batch
size per engine step, and that the server is idle with an empty KV pool
afterwards. Prints the deltas; exit 0 when all hold.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

KEY = "loadgen-check-key"


def start_server(build_dir, log_path):
    log = open(log_path, "w")
    server = subprocess.Popen(
        [f"{build_dir}/bin/gemma-serve", "--backend", "cpu", "--threads", "1", "--host",
         "127.0.0.1", "--port", "0", "--metrics-port", "0", "--api-key", KEY,
         "--max-concurrent-sequences", "8", "--max-context", "1024"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    addr = url = None
    while addr is None and time.time() < deadline:
        time.sleep(0.2)
        for line in open(log_path):
            if "metrics on " in line:
                url = line.split()[-1].replace("0.0.0.0", "127.0.0.1")
            if "listening on " in line:
                addr = line.split()[-1]
    if addr is None or url is None:
        server.kill()
        sys.exit(f"gemma-serve did not start; see {log_path}")
    return server, addr, url


def scrape(url):
    """Unlabelled samples by name, labelled ones as name{k=v}; no buckets."""
    out = {}
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "le" in s.labels:
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=16)
    args = parser.parse_args()
    log_path = tempfile.mktemp(prefix="gemma-loadgen-check-", suffix=".log")
    server, addr, url = start_server(args.build_dir, log_path)
    peak = {"running": 0.0, "kv": 0.0}
    done = threading.Event()

    def watch():
        while not done.is_set():
            m = scrape(url)
            peak["running"] = max(peak["running"], m["gemma_num_requests_running"])
            peak["kv"] = max(peak["kv"], m["gemma_kv_cache_usage_perc"])
            time.sleep(0.05)

    try:
        before = scrape(url)
        watcher = threading.Thread(target=watch)
        watcher.start()
        result_path = log_path + ".json"
        run = subprocess.run(
            [f"{args.build_dir}/bin/gemma-loadgen", "--addr", addr, "--api-key", KEY,
             "--concurrency", str(args.concurrency), "--num-requests", str(args.num_requests),
             "--warmup-requests", "0", "--input-len", str(args.input_len),
             "--output-len", str(args.output_len), "--ignore-eos", "--json", result_path],
            capture_output=True, text=True, timeout=600)
        done.set()
        watcher.join()
        if run.returncode != 0:
            sys.exit(f"gemma-loadgen failed: {run.stderr}")
        loadgen = json.load(open(result_path))
        deadline = time.time() + 10
        after = scrape(url)
        while after["gemma_num_requests_running"] != 0 and time.time() < deadline:
            time.sleep(0.1)
            after = scrape(url)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    n, out_len = args.num_requests, args.output_len
    delta = lambda name: after.get(name, 0) - before.get(name, 0)
    expected = {
        'gemma_request_success_total{finished_reason=length}': n,
        "gemma_generation_tokens_total": n * out_len,
        "gemma_prompt_tokens_total": loadgen["total_input_tokens"],
        "gemma_e2e_request_latency_seconds_count": n,
        "gemma_time_to_first_token_seconds_count": n,
        "gemma_request_queue_time_seconds_count": n,
        "gemma_inter_token_latency_seconds_count": n * (out_len - 1),
        "gemma_batch_size_count": delta("gemma_engine_steps_total"),
    }
    problems = []
    print(f"loadgen: completed={loadgen['completed']} failed={loadgen['failed']} "
          f"output_tokens={loadgen['total_output_tokens']} input_tokens={loadgen['total_input_tokens']}")
    for name, want in expected.items():
        got = delta(name)
        print(f"{name}: +{got:g} (expected +{want:g})")
        if got != want:
            problems.append(name)
    print(f"during: peak running {peak['running']:g}, peak KV usage {peak['kv']:.3f}; after: "
          f"running {after['gemma_num_requests_running']:g}, KV usage "
          f"{after['gemma_kv_cache_usage_perc']:g}")
    if loadgen["completed"] != n or loadgen["total_output_tokens"] != n * out_len:
        problems.append("loadgen totals")
    if after["gemma_num_requests_running"] != 0 or after["gemma_kv_cache_usage_perc"] != 0:
        problems.append("not idle afterwards")
    print("OK" if not problems else f"MISMATCH: {problems}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
