#!/usr/bin/env bash
# Side by side, in one run, over HTTP: `opa run --server` deciding the
# 1000-rule reference scenario written by hand in Rego (POST
# /v1/data/toolgate/deny: the set of denying rules, the cheapest question
# OPA can be asked) and as `toolgate export rego` writes the same bundle
# (POST /v1/data/toolgate/decision: the whole decision), and the toolgate sidecar
# deciding the same bundle (POST /v1/evaluate), each a real process on a
# loopback port, each driven by the same load generator (test/loadgen, 8
# keep-alive connections, the request that hits rule 500), alternating
# ROUNDS times. Decision logging is off on both. OPA is built into bin/ as
# `make compare-opa` builds it: a measuring tool, never a dependency.
#
# Each round also drives a null server (test/loadgen -null-server: reads a
# request by its framing only and writes a fixed answer), the ceiling of
# this machine: the loopback, the kernel, the scheduler and the load
# generator on their own. A ratio to OPA that the ceiling does not reach
# cannot be reached by any server here. The last lines give each round's
# figures and ratios.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=v1.22.3
opa="${root}/bin/opa-${version}"
rounds=${ROUNDS:-2}
duration=${DURATION:-10s}
if [[ ! -x "${opa}" ]]; then
  echo "building opa ${version} (a few minutes)..." >&2
  tmp=$(mktemp -d)
  (cd "${tmp}" && GOBIN="${tmp}/bin" go install "github.com/open-policy-agent/opa@${version}")
  mv "${tmp}/bin/opa" "${opa}"
  rm -rf "${tmp}"
fi
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "${work}"; }
trap cleanup EXIT

cd "${root}"
go build -o "${work}/toolgate" ./cmd/toolgate
go build -o "${work}/loadgen" ./test/loadgen
"${work}/loadgen" -write-bundle "${work}/bundle.json" -rules 1000 >/dev/null
"${work}/toolgate" export rego --bundle-file "${work}/bundle.json" -o "${work}/exported"
request='{"tool_name":"tool_500","agent_id":"agent-1","session_id":"s-1","input":{"command":"run danger_500 now"},"kwargs":{"amount":5000}}'
echo "${request}" > "${work}/request.json"
echo "{\"input\":${request}}" > "${work}/opa-request.json"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_http() { for _ in $(seq 1 100); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "not up: $1" >&2; return 1; }

{
  echo "package toolgate"
  for i in $(seq 0 999); do
    echo "deny contains \"r${i}\" if { input.tool_name == \"tool_${i}\"; contains(input.input.command, \"danger_${i}\"); input.kwargs.amount > ${i} }"
  done
} > "${work}/policy.rego"
hand_port=$(free_port)
"${opa}" run --server --addr "127.0.0.1:${hand_port}" --log-level error "${work}/policy.rego" >"${work}/opa-hand.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:${hand_port}/health"

opa_port=$(free_port)
"${opa}" run --server --addr "127.0.0.1:${opa_port}" --log-level error -b "${work}/exported" >"${work}/opa.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:${opa_port}/health"

tg_port=$(free_port)
"${work}/toolgate" sidecar --bundle-file "${work}/bundle.json" --listen "127.0.0.1:${tg_port}" --decision-log none >"${work}/sidecar.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:${tg_port}/readyz"

null_port=$(free_port)
"${work}/loadgen" -null-server "127.0.0.1:${null_port}" >"${work}/null.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:${null_port}/"

# All must decide the request alike before anything is measured.
curl -fsS -X POST "http://127.0.0.1:${hand_port}/v1/data/toolgate/deny" -d @"${work}/opa-request.json" | grep -q '"r500"'
curl -fsS -X POST "http://127.0.0.1:${opa_port}/v1/data/toolgate/decision" -d @"${work}/opa-request.json" | grep -q '"decision":"deny"'
curl -fsS -X POST "http://127.0.0.1:${tg_port}/v1/evaluate" -d @"${work}/request.json" | grep -q '"decision":"deny"'

# drive NAME URL BODY: one measured run, its output shown and kept.
drive() {
  "${work}/loadgen" -url "$2" -body "$3" -d "${duration}" | tee "${work}/$1.out"
}
rate() { awk '/^throughput/ {print $2}' "${work}/$1.out"; }
summary=()
for r in $(seq 1 "${rounds}"); do
  echo "== round ${r}: opa run --server ${version}, hand-written Rego (its answer, a set of rule ids, is not a decision: counted as such)"
  drive hand "http://127.0.0.1:${hand_port}/v1/data/toolgate/deny" "${work}/opa-request.json" || true
  echo "== round ${r}: opa run --server ${version}, exported Rego"
  drive exported "http://127.0.0.1:${opa_port}/v1/data/toolgate/decision" "${work}/opa-request.json"
  echo "== round ${r}: toolgate sidecar"
  drive sidecar "http://127.0.0.1:${tg_port}/v1/evaluate" "${work}/request.json"
  echo "== round ${r}: ceiling (a server that does nothing)"
  drive null "http://127.0.0.1:${null_port}/v1/evaluate" "${work}/request.json" || true
  # A run that measured nothing reads as 0/s, its ratios as 0.0x.
  summary+=("$(awk -v r="${r}" -v h="$(rate hand)" -v e="$(rate exported)" -v s="$(rate sidecar)" -v n="$(rate null)" 'function x(a, b) { return b > 0 ? a / b : 0 } BEGIN {
    printf "round %d: sidecar %d/s, OPA hand-written %d/s, OPA exported %d/s, ceiling (a server that does nothing) %d/s; sidecar/OPA hand-written %.1fx, sidecar/OPA exported %.1fx, ceiling/OPA hand-written %.1fx", r, s, h, e, n, x(s, h), x(s, e), x(n, h) }')")
done
echo "== summary (decisions/s; the ceiling answers without deciding)"
printf '%s\n' "${summary[@]}"
