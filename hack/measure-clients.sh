#!/usr/bin/env bash
# End-to-end evaluate() latency of the Python and TypeScript clients against a
# real sidecar serving the FINDINGS reference bundle (1000 rules), over its
# Unix socket and its loopback port, p50 and p99; and the Go in-process
# evaluator (client/local) on the same bundle and request. Targets on a
# 2-core machine: Python and Node p50 <= 150us over the socket, Go <= 1us.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${root}"
n=${N:-20000}

work=$(mktemp -d /tmp/tgmeasure.XXXXXX)
sidecar_pid=""
cleanup() {
  if [[ -n "${sidecar_pid}" ]]; then kill "${sidecar_pid}" 2>/dev/null || true; wait "${sidecar_pid}" 2>/dev/null || true; fi
  rm -rf "${work}"
}
trap cleanup EXIT

go build -o "${work}/toolgate" ./cmd/toolgate
go run ./test/loadgen -write-bundle "${work}/bundle.json" -rules 1000
# Decision log lines are written as in production, to /dev/null.
"${work}/toolgate" sidecar --bundle-file "${work}/bundle.json" \
  --listen 127.0.0.1:0 --listen "unix:${work}/s.sock" >/dev/null 2>"${work}/sidecar.log" &
sidecar_pid=$!
tcp=""
for _ in $(seq 100); do
  if grep -q 'bundle loaded' "${work}/sidecar.log"; then
    tcp=$(sed -n 's/.*msg="serving decisions" addr=\(127\.0\.0\.1:[0-9]*\).*/\1/p' "${work}/sidecar.log" | head -n 1)
    break
  fi
  sleep 0.1
done
if [[ -z "${tcp}" ]]; then
  echo "the sidecar did not start:" >&2
  cat "${work}/sidecar.log" >&2
  exit 1
fi

echo "== evaluate() against a sidecar with 1000 rules, the rule-500 request, ${n} calls each, one kept-alive connection"
for url in "unix://${work}/s.sock" "http://${tcp}"; do
  python3 clients/python/bench.py --url "${url}" --n "${n}"
  python3 clients/python/bench.py --url "${url}" --n "${n}" --async
done
# bench.mjs runs the built client (make typescript-client builds it first).
for url in "unix://${work}/s.sock" "http://${tcp}"; do
  node clients/typescript/bench.mjs --url "${url}" --n "${n}"
done
echo "== Go in process (client/local), same bundle and request"
go test -run '^$' -bench 'LocalReference' -benchmem -count 3 ./client/local/ | grep '^Benchmark'
