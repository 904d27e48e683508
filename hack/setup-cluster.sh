#!/usr/bin/env bash
# Builds (once) what the single-node test cluster needs beyond the envtest
# control plane (hack/setup-envtest.sh): kubelet, kube-controller-manager,
# kube-scheduler, kube-proxy and kubectl v1.37.2 from k8s.io/kubernetes with the
# published staging modules and stamped versions (hack/cluster/), containerd
# v2.4.2 with its runc shim and ctr from the Go module proxy, and Debian's
# runc and CNI plugins. Binaries are cached under bin/; a warm run is a no-op.
#
# The last line of stdout is the absolute directory holding the Kubernetes
# binaries; containerd's are in bin/containerd/<version>/. Progress goes to
# stderr, with the cost of each build.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
k8s_version=1.37.2
containerd_version=2.4.2
kdir=$("${root}/hack/setup-envtest.sh" | tail -n 1)
cdir="${root}/bin/containerd/${containerd_version}"
mkdir -p "${kdir}" "${cdir}"
nice=(nice -n 10)
total=$SECONDS

k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v${k8s_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
for name in kubelet kube-controller-manager kube-scheduler kube-proxy kubectl; do
  [[ -x "${kdir}/${name}" ]] && continue
  echo "building ${name} v${k8s_version} into ${kdir}..." >&2
  started=$SECONDS
  (cd "${root}/hack/cluster" && CGO_ENABLED=0 "${nice[@]}" go build -trimpath -ldflags "${k8s_ldflags}" -o "${kdir}/${name}.tmp" "./${name}")
  mv "${kdir}/${name}.tmp" "${kdir}/${name}"
  echo "built ${name} in $((SECONDS - started))s" >&2
done

if [[ ! -x "${cdir}/containerd" || ! -x "${cdir}/containerd-shim-runc-v2" || ! -x "${cdir}/ctr" ]]; then
  echo "building containerd v${containerd_version} into ${cdir}..." >&2
  started=$SECONDS
  tmp=$(mktemp -d); trap 'rm -rf "${tmp}"' EXIT
  CGO_ENABLED=0 GOBIN="${tmp}" GOFLAGS=-trimpath "${nice[@]}" go install -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=v${containerd_version}" \
    "github.com/containerd/containerd/v2/cmd/containerd@v${containerd_version}" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@v${containerd_version}" \
    "github.com/containerd/containerd/v2/cmd/ctr@v${containerd_version}"
  mv "${tmp}"/containerd "${tmp}"/containerd-shim-runc-v2 "${tmp}"/ctr "${cdir}/"
  echo "built containerd in $((SECONDS - started))s" >&2
fi

missing=()
command -v runc >/dev/null || missing+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
command -v nsenter >/dev/null || missing+=(util-linux)
if ((${#missing[@]})); then
  echo "installing ${missing[*]} with apt-get..." >&2
  started=$SECONDS
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
  echo "installed ${missing[*]} in $((SECONDS - started))s" >&2
fi

{
  echo "etcd version: $(sed -n 's/^etcd version: //p' "${kdir}/VERSIONS" | head -1)"
  echo "kube-apiserver version: v${k8s_version}"
  for name in kubelet kube-controller-manager kube-scheduler kube-proxy kubectl; do echo "${name} version: v${k8s_version}"; done
  echo "containerd version: v${containerd_version}"
  echo "runc version: $(runc --version | sed -n 's/^runc version //p')"
} > "${kdir}/CLUSTER-VERSIONS"
echo "setup-cluster: $((SECONDS - total))s" >&2
echo "${kdir}"
