#!/usr/bin/env python3
"""Small helpers for `scripts/gpu.sh realwidth` (scripts/gpu/realwidth.sh); standard library only.

  golden_tool.py count DIR                       -> number of prompts
  golden_tool.py ids DIR I [SEP]                 -> prompt I's ids joined by SEP (default ',')
  golden_tool.py compare DIR I "GOT IDS" FLOOR   -> "n/N ids equal, k required: ok|DIFFER"
  golden_tool.py startup LOG START_EPOCH [READY_EPOCH] -> start-up phases of a gemma-serve log
"""
import datetime
import json
import re
import sys


def golden(d):
    with open(f"{d}/golden.json") as f:
        return json.load(f)["prompts"]


def compare(d, i, got, floor):
    p = golden(d)[int(i)]
    want, margins = p["greedy"], p["margins"]
    got = got.replace(",", " ").split()
    got = [int(x) for x in got if x.lstrip("-").isdigit()]
    n = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    need = next((k for k, m in enumerate(margins) if m < float(floor)), len(margins))
    verdict = "ok" if n >= need else "DIFFER"
    if not got:
        verdict = "NO OUTPUT"
    return f"{n}/{len(want)} ids equal, {need} required (margin floor {floor}): {verdict}"


STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] (?:\[[^\]]*\] )+(.*)$")


def startup(log, start, ready=None):
    """Offsets of the start-up log lines from process start (spdlog local time)."""
    start = float(start)
    lines = []
    with open(log, errors="replace") as f:
        for line in f:
            m = STAMP.match(line.rstrip("\n"))
            if not m:
                continue
            t = datetime.datetime.strptime(m.group(1)[:26], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            lines.append((t - start, m.group(2)))
    out, weights = [], []
    for dt, msg in lines:
        if msg.startswith("request ") or msg.startswith("received signal") or msg.startswith("draining"):
            break
        if msg.startswith("cuda: weights "):
            weights.append((dt, msg))
            continue
        if weights:  # first and last progress line only
            out.append(weights[0])
            if len(weights) > 1:
                out.append(weights[-1])
            weights = []
        out.append((dt, msg.splitlines()[0][:110]))
    out.extend(weights[:1] + weights[-1:] if len(weights) > 1 else weights)
    for dt, msg in out:
        print(f"  +{dt:7.2f} s  {msg}")
    if ready is not None:
        print(f"  +{float(ready) - start:7.2f} s  health SERVING (gemma-cli health answered)")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "count":
        print(len(golden(args[0])))
    elif cmd == "ids":
        sep = args[2] if len(args) > 2 else ","
        print(sep.join(str(x) for x in golden(args[0])[int(args[1])]["ids"]))
    elif cmd == "compare":
        print(compare(*args))
    elif cmd == "startup":
        startup(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
