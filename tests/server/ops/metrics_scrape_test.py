#!/usr/bin/env python3
"""/metrics and JSON logs through a real gemma-serve.

Starts gemma-serve (CPU, --metrics-port 0, --log-format json, an API key),
sends a known set of Generate calls, scrapes /metrics and parses it with
prometheus_client's own parser, then checks the counters against what was
sent, and that every log line is a JSON object carrying request_id on the
lines about a request. Prints 'N passed, N failed' last.
"""
import argparse
import importlib.util
import json
import signal
import subprocess
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

KEY = "scrape-test-key"
failures = []
passes = 0


def check(name, condition, detail=""):
    global passes
    if condition:
        passes += 1
    else:
        failures.append(name)
        print(f"FAIL {name}: {detail}", file=sys.stderr)


def load_stubs(client_path):
    spec = importlib.util.spec_from_file_location("gemma_client", client_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_stubs(module.DEFAULT_PROTO_DIR)


def start_server(args, lines):
    server = subprocess.Popen(
        [args.serve, "--model", args.model, "--backend", "cpu", "--host", "127.0.0.1",
         "--port", "0", "--metrics-port", "0", "--threads", "1", "--max-context", "1024",
         "--log-format", "json", "--api-key", KEY],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    grpc_addr = metrics_url = None
    deadline = time.time() + 60
    for line in server.stdout:
        lines.append(line)
        msg = json.loads(line)["msg"]
        if msg.startswith("metrics on "):
            metrics_url = msg.split()[-1].replace("0.0.0.0", "127.0.0.1")
        if msg.startswith("listening on "):
            grpc_addr = msg.split()[-1]
            return server, grpc_addr, metrics_url
        if time.time() > deadline:
            break
    server.kill()
    sys.exit("gemma-serve did not start:\n" + "".join(lines))


def generate(stub, pb2, request_id, max_tokens, key=KEY):
    request = pb2.GenerateRequest(request_id=request_id, text=b"Love is")
    request.sampling.temperature = 0.0
    request.stopping.max_tokens = max_tokens
    request.stopping.ignore_eos = True
    finish = None
    for response in stub.Generate(request, metadata=[("authorization", f"Bearer {key}")],
                                  timeout=60):
        if response.HasField("finish"):
            finish = response.finish
    return finish


def scrape(url):
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def check_metrics(samples, finishes):
    n = len(finishes)
    completion = sum(f.usage.completion_tokens for f in finishes)
    prompt = sum(f.usage.prompt_tokens for f in finishes)
    check("success length", value(samples, "gemma_request_success_total", finished_reason="length") == n,
          value(samples, "gemma_request_success_total", finished_reason="length"))
    check("success stop", value(samples, "gemma_request_success_total", finished_reason="stop") == 0)
    check("generation tokens", value(samples, "gemma_generation_tokens_total") == completion,
          f"{value(samples, 'gemma_generation_tokens_total')} != {completion}")
    check("prompt tokens histogram", value(samples, "gemma_request_prompt_tokens_sum") == prompt)
    check("generation histogram", value(samples, "gemma_request_generation_tokens_sum") == completion)
    for h in ("gemma_e2e_request_latency_seconds", "gemma_time_to_first_token_seconds",
              "gemma_request_queue_time_seconds"):
        check(f"{h} count", value(samples, h + "_count") == n, value(samples, h + "_count"))
        check(f"{h} +Inf", value(samples, h + "_bucket", le="+Inf") == n)
    check("itl count", value(samples, "gemma_inter_token_latency_seconds_count") == completion - n,
          value(samples, "gemma_inter_token_latency_seconds_count"))
    check("batch histogram == steps", value(samples, "gemma_batch_size_count")
          == value(samples, "gemma_engine_steps_total"))
    phases = [value(samples, "gemma_engine_step_seconds_total", phase=p) for p in ("schedule", "forward", "commit")]
    check("step phases", all(v is not None and v >= 0 for v in phases) and phases[1] > 0, phases)
    check("idle: running", value(samples, "gemma_num_requests_running") == 0)
    check("idle: waiting", value(samples, "gemma_num_requests_waiting") == 0)
    check("idle: kv usage", value(samples, "gemma_kv_cache_usage_perc") == 0)
    check("kv blocks", value(samples, "gemma_kv_cache_free_blocks") > 0)
    check("prefix cache", value(samples, "gemma_prefix_cache_hits_total")
          <= value(samples, "gemma_prefix_cache_queries_total"))


def check_logs(lines, request_ids):
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            check("log line is JSON", False, line)
    check("log fields", all({"ts", "level", "msg"} <= set(p) for p in parsed))
    for rid in request_ids:
        check(f"log line for {rid}", any(p.get("request_id") == rid for p in parsed))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", required=True)
    parser.add_argument("--client", required=True, help="clients/python/gemma_client.py")
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    import grpc
    pb2, pb2_grpc = load_stubs(args.client)
    lines = []
    server, addr, metrics_url = start_server(args, lines)
    try:
        check("metrics url", metrics_url is not None)
        stub = pb2_grpc.GemmaStub(grpc.insecure_channel(addr))
        finishes = [generate(stub, pb2, f"scrape-{i}", 3 + i) for i in range(6)]
        check("all finished", all(f is not None for f in finishes))
        try:
            generate(stub, pb2, "scrape-bad-key", 3, key="wrong")
            check("wrong key refused", False)
        except grpc.RpcError as error:
            check("wrong key refused", error.code() == grpc.StatusCode.UNAUTHENTICATED)
        # The engine publishes its figures after the step that sent the
        # last token: wait until it is idle.
        deadline = time.time() + 10
        samples = scrape(metrics_url)
        while value(samples, "gemma_num_requests_running") != 0 and time.time() < deadline:
            time.sleep(0.1)
            samples = scrape(metrics_url)
        check_metrics(samples, finishes)
    finally:
        server.send_signal(signal.SIGTERM)
        rest, _ = server.communicate(timeout=60)
        lines.extend(rest.splitlines(keepends=True))
    check("exit 0", server.returncode == 0, server.returncode)
    check_logs(lines, [f"scrape-{i}" for i in range(6)])
    print(f"{passes} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
