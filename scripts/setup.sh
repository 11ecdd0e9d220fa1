#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, as root, for running the agent's lab and the tests: the kernel tools the
# dataplane drives, the BGP speakers (gobgpd and its protos; BIRD and FRR as peers), the CNI plugins a kubelet runs
# (bridge, host-local), QEMU with busybox and ipvsadm for the guest tier that has the kernel features the host lacks
# (IPVS, dummy, ipip), promtool for the alert rules, kubectl for the API server tests, mmdebstrap, buildah and podman
# (runc where crun refuses a cgroup-hybrid host) to build the agent's image and run it in a lab node (npm run image),
# then the npm workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(iptables ipset nftables iproute2 conntrack tcpdump prometheus ca-certificates openssl
  gobgpd golang-github-osrg-gobgp-dev bird2 frr containernetworking-plugins
  qemu-system-x86 busybox-static ipvsadm cpio kmod socat
  mmdebstrap podman buildah runc)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The prometheus package would start a server; policy-rc.d keeps package scripts from starting services.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi

# The QEMU guest tier (packages/testkit/src/qemu) boots Debian's cloud kernel, which has IPVS, dummy and ipip as
# modules. It is unpacked, not installed: the host keeps its own kernel. The package the meta-package currently
# depends on is fetched once; depmod writes the modules.dep that the package's postinst would have written.
guest_dir=${KUBE_ROUTER_GUEST_DIR:-/var/cache/kube-router-ts/guest}
guest_kernel=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[^ ]*-cloud-amd64\)$/\1/p' | head -n1)
if [ -z "$guest_kernel" ]; then
  apt-get update -qq
  guest_kernel=$(apt-cache depends linux-image-cloud-amd64 | sed -n 's/^ *Depends: \(linux-image-[^ ]*-cloud-amd64\)$/\1/p' | head -n1)
fi
guest_release=${guest_kernel#linux-image-}
if [ ! -f "$guest_dir/root/lib/modules/$guest_release/modules.dep" ]; then
  mkdir -p "$guest_dir"
  (cd "$guest_dir" && rm -f ./*.deb && apt-get download -qq "$guest_kernel" 2>/dev/null)
  rm -rf "$guest_dir/root" && dpkg-deb -x "$guest_dir/$guest_kernel"_*.deb "$guest_dir/root"
  depmod -b "$guest_dir/root" "$guest_release"
  rm -f "$guest_dir"/*.deb
fi

npm ci --no-audit --no-fund
