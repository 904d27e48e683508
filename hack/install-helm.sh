#!/usr/bin/env bash
# Builds helm from the Go module proxy into bin/helm-<version>, because no
# release tarball can be downloaded on our machines. A cold build takes
# several minutes on 2 cores; a warm one is a no-op.
#
# The last line of stdout is the absolute path of the helm binary. Progress
# goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=v3.22.0
bin="${root}/bin/helm-${version}"

if [[ ! -x "${bin}" ]]; then
  echo "building helm ${version} into ${bin} (cold build: several minutes)..." >&2
  started=$SECONDS
  tmp=$(mktemp -d)
  trap 'rm -rf "${tmp}"' EXIT
  # Outside any module, so our go.mod neither constrains nor records helm.
  (cd "${tmp}" && CGO_ENABLED=0 GOBIN="${tmp}" go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@${version}")
  # Rename within bin/ so a concurrent run never sees half a binary.
  mv "${tmp}/helm" "${bin}.tmp.$$"
  mv "${bin}.tmp.$$" "${bin}"
  echo "built helm ${version} in $((SECONDS - started))s" >&2
fi

"${bin}" version --short >/dev/null
echo "${bin}"
