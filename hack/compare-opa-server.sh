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
# cannot be reached by any server here.
#
# Every server is measured twice a round: on shared cores, as it would run
# in a Pod, and with one core of its own (the load generator on the
# others: taskset). The load generator reports each server's CPU per
# decision from /proc/PID/stat (test/loadgen -server-pid), the one figure
# neither steal time on a shared VM nor the load generator's own share
# moves. The last lines give each round's figures and ratios.
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
# start_servers SET [PIN...]: OPA (hand-written and exported Rego), the
# sidecar and the null server, each started under PIN (e.g. taskset -c 1);
# their ports and pids are kept as port_SET_NAME and pid_SET_NAME.
start_servers() {
  local set=$1; shift
  local port
  port=$(free_port)
  "$@" "${opa}" run --server --addr "127.0.0.1:${port}" --log-level error "${work}/policy.rego" >"${work}/opa-hand-${set}.log" 2>&1 &
  pids+=($!); printf -v "pid_${set}_hand" %s $!; printf -v "port_${set}_hand" %s "${port}"
  wait_http "http://127.0.0.1:${port}/health"
  port=$(free_port)
  "$@" "${opa}" run --server --addr "127.0.0.1:${port}" --log-level error -b "${work}/exported" >"${work}/opa-${set}.log" 2>&1 &
  pids+=($!); printf -v "pid_${set}_exported" %s $!; printf -v "port_${set}_exported" %s "${port}"
  wait_http "http://127.0.0.1:${port}/health"
  port=$(free_port)
  "$@" "${work}/toolgate" sidecar --bundle-file "${work}/bundle.json" --listen "127.0.0.1:${port}" --decision-log none >"${work}/sidecar-${set}.log" 2>&1 &
  pids+=($!); printf -v "pid_${set}_sidecar" %s $!; printf -v "port_${set}_sidecar" %s "${port}"
  wait_http "http://127.0.0.1:${port}/readyz"
  port=$(free_port)
  "$@" "${work}/loadgen" -null-server "127.0.0.1:${port}" >"${work}/null-${set}.log" 2>&1 &
  pids+=($!); printf -v "pid_${set}_null" %s $!; printf -v "port_${set}_null" %s "${port}"
  wait_http "http://127.0.0.1:${port}/"
}

# Shared: every process may run on every core, as in a Pod. One core
# each: the servers on the last core, the load generator on the others,
# so that no server's figure depends on how much CPU the load generator
# takes from it (more, the faster the server answers).
cores=$(nproc)
start_servers shared
sets=(shared)
if [[ "${cores}" -ge 2 ]]; then
  start_servers pinned taskset -c "$((cores - 1))"
  sets+=(pinned)
fi

# All must decide the request alike before anything is measured.
for set in "${sets[@]}"; do
  hand="port_${set}_hand" exported="port_${set}_exported" sidecar="port_${set}_sidecar"
  curl -fsS -X POST "http://127.0.0.1:${!hand}/v1/data/toolgate/deny" -d @"${work}/opa-request.json" | grep -q '"r500"'
  curl -fsS -X POST "http://127.0.0.1:${!exported}/v1/data/toolgate/decision" -d @"${work}/opa-request.json" | grep -q '"decision":"deny"'
  curl -fsS -X POST "http://127.0.0.1:${!sidecar}/v1/evaluate" -d @"${work}/request.json" | grep -q '"decision":"deny"'
done

# drive SET NAME PATH BODY: one measured run of server NAME of SET, its
# output shown and kept; the load generator reads the server's CPU too.
drive() {
  local port="port_$1_$2" pid="pid_$1_$2" pin=()
  if [[ "$1" == pinned ]]; then pin=(taskset -c "0-$((cores - 2))"); fi
  "${pin[@]}" "${work}/loadgen" -url "http://127.0.0.1:${!port}$3" -body "$4" -d "${duration}" -server-pid "${!pid}" | tee "${work}/$1-$2.out"
}
rate() { awk '/^throughput/ {print $2}' "${work}/$1.out"; }
cpu() { awk '/^server cpu/ {sub("us/request", "", $3); print $3}' "${work}/$1.out"; }
summary=()
for r in $(seq 1 "${rounds}"); do
  for set in "${sets[@]}"; do
    if [[ "${set}" == pinned ]]; then where="one core each (servers on core $((cores - 1)), the load generator on the rest)"; else where="shared cores"; fi
    echo "== round ${r}, ${where}: opa run --server ${version}, hand-written Rego (its answer, a set of rule ids, is not a decision: counted as such)"
    drive "${set}" hand /v1/data/toolgate/deny "${work}/opa-request.json" || true
    echo "== round ${r}, ${where}: opa run --server ${version}, exported Rego"
    drive "${set}" exported /v1/data/toolgate/decision "${work}/opa-request.json"
    echo "== round ${r}, ${where}: toolgate sidecar"
    drive "${set}" sidecar /v1/evaluate "${work}/request.json"
    echo "== round ${r}, ${where}: ceiling (a server that does nothing)"
    drive "${set}" null /v1/evaluate "${work}/request.json" || true
    # A run that measured nothing reads as 0/s, its ratios as 0.0x.
    summary+=("$(awk -v r="${r}" -v set="${set}" -v h="$(rate "${set}-hand")" -v e="$(rate "${set}-exported")" -v s="$(rate "${set}-sidecar")" -v n="$(rate "${set}-null")" \
      -v ch="$(cpu "${set}-hand")" -v ce="$(cpu "${set}-exported")" -v cs="$(cpu "${set}-sidecar")" -v cn="$(cpu "${set}-null")" 'function x(a, b) { return b > 0 ? a / b : 0 } BEGIN {
      printf "round %d, %s: sidecar %d/s, OPA hand-written %d/s, OPA exported %d/s, ceiling %d/s; sidecar/OPA hand-written %.1fx, sidecar/OPA exported %.1fx, ceiling/OPA hand-written %.1fx\n", r, set, s, h, e, n, x(s, h), x(s, e), x(n, h)
      printf "round %d, %s: CPU per decision: sidecar %.1fus, OPA hand-written %.1fus, OPA exported %.1fus, ceiling %.1fus; OPA hand-written/sidecar %.1fx, OPA exported/sidecar %.1fx", r, set, cs, ch, ce, cn, x(ch, cs), x(ce, cs) }')")
  done
done
echo "== summary (decisions/s and the server's CPU per decision; the ceiling answers without deciding)"
printf '%s\n' "${summary[@]}"
