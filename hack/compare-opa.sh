#!/usr/bin/env bash
# Side-by-side, in one run: OPA evaluating the FINDINGS reference scenario in
# Rego (1000 rules, rule i = tool_name == tool_i AND command contains danger_i
# AND amount > i; the input hits rule 500), written by hand and as `toolgate
# export rego` writes the same 1000-rule bundle (test/loadgen -write-bundle,
# the bundle the engine benchmark and the sidecar load test use), and
# toolgate's engine on the same scenario (BenchmarkEvaluate/rules=1000/by-tool). OPA is built from the Go
# module proxy into bin/ (about 4 minutes the first time); it is a measuring
# tool only, never a dependency of toolgate.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=v1.22.3
opa="${root}/bin/opa-${version}"
if [[ ! -x "${opa}" ]]; then
  echo "building opa ${version} (a few minutes)..." >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "${tmp}"' EXIT
  (cd "${tmp}" && GOBIN="${tmp}/bin" go install "github.com/open-policy-agent/opa@${version}")
  mv "${tmp}/bin/opa" "${opa}"
fi

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
{
  echo "package toolgate"
  for i in $(seq 0 999); do
    echo "deny contains \"r${i}\" if { input.tool_name == \"tool_${i}\"; contains(input.input.command, \"danger_${i}\"); input.kwargs.amount > ${i} }"
  done
} > "${work}/policy.rego"
echo '{"tool_name":"tool_500","agent_id":"agent-1","input":{"command":"run danger_500 now"},"kwargs":{"amount":5000}}' > "${work}/input.json"

echo "== OPA ${version}: opa bench, 1000 Rego rules, input hits rule 500"
"${opa}" bench --count 3 -d "${work}/policy.rego" -i "${work}/input.json" 'data.toolgate.deny' \
  | grep -E 'ns/op|allocs/op|B/op' | sort -u
echo "== OPA ${version}: opa bench, the same 1000 rules exported by toolgate export rego, data.toolgate.decision"
(cd "${root}" && go run ./test/loadgen -write-bundle "${work}/bundle.json" -rules 1000 >/dev/null \
  && go run ./cmd/toolgate export rego --bundle-file "${work}/bundle.json" -o "${work}/exported")
"${opa}" check --strict -b "${work}/exported"
"${opa}" bench --count 3 -b "${work}/exported" -i "${work}/input.json" 'data.toolgate.decision' \
  | grep -E 'ns/op|allocs/op|B/op' | sort -u
echo "== toolgate engine: the same 1000 rules as one Policy"
cd "${root}" && go test -run '^$' -bench 'Evaluate/rules=1000/by-tool' -benchmem -count 3 ./engine/ | grep '^Benchmark'
