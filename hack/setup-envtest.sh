#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from the Go
# module proxy, because envtest's prebuilt binaries cannot be downloaded on
# our machines. Binaries are cached under bin/k8s/<version>/; a cold build
# takes ~12 minutes on 2 cores, a warm one is a no-op.
#
# The last line of stdout is the absolute directory holding the binaries, for
# KUBEBUILDER_ASSETS. Progress goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
k8s_version=1.37.2
etcd_version=3.6.16
dir="${root}/bin/k8s/${k8s_version}"
mkdir -p "${dir}"

build() { # name, module dir, ldflags
  local name=$1 src=$2 ldflags=$3
  if [[ -x "${dir}/${name}" ]]; then
    return 0
  fi
  echo "building ${name} into ${dir} (cold build: several minutes)..." >&2
  local started=$SECONDS
  (cd "${src}" && CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${dir}/${name}.tmp" .)
  mv "${dir}/${name}.tmp" "${dir}/${name}"
  echo "built ${name} in $((SECONDS - started))s" >&2
}

# The version must be stamped, or clients that parse the server version
# (kubectl, helm's kubeVersion checks) fail on "v0.0.0-master+$Format:%H$".
build kube-apiserver "${root}/hack/envtest/kube-apiserver" \
  "-s -w -X k8s.io/component-base/version.gitVersion=v${k8s_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
build etcd "${root}/hack/envtest/etcd" "-s -w"

echo "etcd version: v${etcd_version}" > "${dir}/VERSIONS"
echo "kube-apiserver version: v${k8s_version}" >> "${dir}/VERSIONS"
echo "${dir}"
