#!/usr/bin/env bash
# Old vs new engine, differentially: hack/enginediff's corpus of ordered
# bundles (nothing of the gateway model) evaluated by the engine at a base
# commit (default: the last before the gateway model, issue 9) and by the
# working tree's; any difference in decision, matched ids, reason, code or
# trace fails.   hack/diff-engine.sh [BASE] [CASES] [SEED]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base=${1:-62c4617}
cases=${2:-20000}
seed=${3:-1}

work=$(mktemp -d)
cleanup() { git -C "${root}" worktree remove --force "${work}/base" >/dev/null 2>&1 || true; rm -rf "${work}"; }
trap cleanup EXIT
git -C "${root}" worktree add --detach "${work}/base" "${base}" >/dev/null 2>&1
mkdir -p "${work}/base/hack/enginediff"
cp "${root}/hack/enginediff/main.go" "${work}/base/hack/enginediff/main.go"
(cd "${work}/base" && go build -o "${work}/base.bin" ./hack/enginediff)
(cd "${root}" && go build -o "${work}/head.bin" ./hack/enginediff)
"${work}/base.bin" -n "${cases}" -seed "${seed}" > "${work}/base.out" 2>/dev/null
"${work}/head.bin" -n "${cases}" -seed "${seed}" > "${work}/head.out" 2>/dev/null
if ! cmp -s "${work}/base.out" "${work}/head.out"; then
  diff "${work}/base.out" "${work}/head.out" | head -20
  echo "FAIL: $(diff "${work}/base.out" "${work}/head.out" | grep -c '^<') of ${cases} cases differ from ${base}" >&2
  exit 1
fi
deny=$(grep -c '"decision":"deny"' "${work}/head.out" || true)
echo "ok: ${cases} cases (seed ${seed}; ${deny} deny, $((cases - deny)) allow) decide and trace identically at ${base} and in the working tree"
