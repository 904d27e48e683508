#!/usr/bin/env python3
"""End-to-end evaluate() latency from Python: the request that hits rule 500
of the 1000-rule load-generator bundle (go run ./test/loadgen -write-bundle F
-rules 1000), N times on one kept-alive client, after a warm-up.

    python3 clients/python/bench.py --url unix:///tmp/x/s.sock --n 10000

prints one line: python <unix|tcp> n=N p50=..us p99=..us; with --async, the
same calls awaited one after another on a toolgate.AsyncClient
(python-async ...).
"""

from __future__ import annotations

import argparse
import asyncio
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
    ap.add_argument("--async", dest="use_async", action="store_true", help="measure toolgate.AsyncClient")
    opts = ap.parse_args()
    if opts.n < 1 or opts.warmup < 0:
        ap.error("--n must be at least 1 and --warmup not negative")

    md = toolgate.EvaluationMetadata(input={"command": "run danger_500 now"}, kwargs={"amount": 5000})
    if opts.use_async:
        return asyncio.run(measure_async(opts, md))
    client = toolgate.Client(opts.url, timeout=2)
    evaluate = client.evaluate

    def call() -> toolgate.EvaluationResult:
        return evaluate("tool_500", session_id="bench", agent_id="agent-1", metadata=md)

    clock = time.perf_counter_ns

    def timed() -> int:
        t0 = clock()
        res = call()
        took = clock() - t0
        return -1 if res.code == toolgate.SIDECAR_UNAVAILABLE else took

    return report("python", client.url, opts, call(), timed)


async def measure_async(opts: argparse.Namespace, md: toolgate.EvaluationMetadata) -> int:
    async with toolgate.AsyncClient(opts.url, timeout=2) as client:
        clock = time.perf_counter_ns
        first = await client.evaluate("tool_500", session_id="bench", agent_id="agent-1", metadata=md)
        took = []
        for i in range(opts.warmup + opts.n):
            t0 = clock()
            res = await client.evaluate("tool_500", session_id="bench", agent_id="agent-1", metadata=md)
            took.append(-1 if res.code == toolgate.SIDECAR_UNAVAILABLE else clock() - t0)
        it = iter(took)
        return report("python-async", client.url, opts, first, lambda: next(it))


def report(name: str, url: str, opts: argparse.Namespace, first: toolgate.EvaluationResult, timed) -> int:
    """Checks the first answer is a rule's decision, then takes warmup + n
    timings from timed() (-1: no decision) and prints p50 and p99 of the n."""
    transport = "unix" if url.startswith("unix:") else "tcp"
    if first.code == toolgate.SIDECAR_UNAVAILABLE or first.matched_rule_id is None:
        print("bench: the sidecar at %s did not decide by a rule: %s" % (url, first), file=sys.stderr)
        return 1
    for _ in range(opts.warmup):
        timed()
    took = [0] * opts.n
    for i in range(opts.n):
        took[i] = timed()
        if took[i] < 0:
            print("bench: call %d: the sidecar gave no decision" % i, file=sys.stderr)
            return 1
    took.sort()
    p50 = took[(opts.n - 1) * 50 // 100] / 1000
    p99 = took[(opts.n - 1) * 99 // 100] / 1000
    print("%s %s n=%d p50=%.0fus p99=%.0fus" % (name, transport, opts.n, p50, p99))
    return 0

if __name__ == "__main__":
    sys.exit(main())
