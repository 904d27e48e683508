#!/usr/bin/env bash
# Side-by-side, in one run: the engine benchmarks both trees have, at a base
# commit (default: the last commit before the gateway model, issue 9) and in
# the working tree, alternating runs so the shared machine's noise hits both
# alike. Ordered bundles must not get more than 10% slower.
#   hack/compare-engine.sh [BASE] [COUNT]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base=${1:-62c4617}
count=${2:-5}
# Go splits -bench at slashes, so the names are filtered here instead.
names='^BenchmarkEvaluate/(rules=1000/by-tool|rules=1000/scan|regex/1KiB|frozen=10000)-'

work=$(mktemp -d)
cleanup() { git -C "${root}" worktree remove --force "${work}/base" >/dev/null 2>&1 || true; rm -rf "${work}"; }
trap cleanup EXIT
git -C "${root}" worktree add --detach "${work}/base" "${base}" >/dev/null 2>&1
(cd "${work}/base" && go test -c -o "${work}/base.test" ./engine/)
(cd "${root}" && go test -c -o "${work}/head.test" ./engine/)

for i in $(seq "${count}"); do
  for side in base head; do
    (cd "${root}/engine" && "${work}/${side}.test" -test.run '^$' -test.bench '^BenchmarkEvaluate$' -test.benchmem 2>/dev/null) \
      | grep -E "${names}" | sed "s/^/${side} /" >> "${work}/runs"
  done
done

# Median ns/op per benchmark and side, and head's change against base.
python3 - "${work}/runs" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    side, name, _, ns = line.split()[:4]
    runs.setdefault(re.sub(r"-\d+$", "", name), {}).setdefault(side, []).append(float(ns))
for name in sorted(runs):
    b, h = (statistics.median(runs[name][s]) for s in ("base", "head"))
    print(f"{name:45s} base {b:10.1f} ns/op   head {h:10.1f} ns/op   {(h - b) * 100 / b:+6.1f}%")
PY
