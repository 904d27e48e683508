#!/usr/bin/env python3
"""End-to-end evaluate() latency from Python: the request that hits rule 500
of the 1000-rule load-generator bundle (go run ./test/loadgen -write-bundle F
-rules 1000), N times on one kept-alive client, after a warm-up.

    python3 clients/python/bench.py --url unix:///tmp/x/s.sock --n 10000

prints one line: python <unix|tcp> n=N p50=..us p99=..us
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import toolgate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="the sidecar: unix:///path.sock or http://host:port")
    ap.add_argument("--n", type=int, default=10000, help="measured calls")
    ap.add_argument("--warmup", type=int, default=1000, help="calls before measuring")
    opts = ap.parse_args()
    if opts.n < 1 or opts.warmup < 0:
        ap.error("--n must be at least 1 and --warmup not negative")

    client = toolgate.Client(opts.url, timeout=2)
    transport = "unix" if client.url.startswith("unix:") else "tcp"
    md = toolgate.EvaluationMetadata(input={"command": "run danger_500 now"}, kwargs={"amount": 5000})
    evaluate = client.evaluate

    def call() -> toolgate.EvaluationResult:
        return evaluate("tool_500", session_id="bench", agent_id="agent-1", metadata=md)

    res = call()
    if res.code == toolgate.SIDECAR_UNAVAILABLE or res.matched_rule_id is None:
        print("bench: the sidecar at %s did not decide by a rule: %s" % (client.url, res), file=sys.stderr)
        return 1
    for _ in range(opts.warmup):
        call()
    clock = time.perf_counter_ns
    took = [0] * opts.n
    for i in range(opts.n):
        t0 = clock()
        res = call()
        took[i] = clock() - t0
        if res.code == toolgate.SIDECAR_UNAVAILABLE:
            print("bench: call %d: %s" % (i, res.reason), file=sys.stderr)
            return 1
    took.sort()
    p50 = took[(opts.n - 1) * 50 // 100] / 1000
    p99 = took[(opts.n - 1) * 99 // 100] / 1000
    print("python %s n=%d p50=%.0fus p99=%.0fus" % (transport, opts.n, p50, p99))
    return 0


if __name__ == "__main__":
    sys.exit(main())
