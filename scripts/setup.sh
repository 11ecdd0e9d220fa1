#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, as root, for running the agent's lab and the tests: the kernel tools the
# dataplane drives, the BGP speakers (gobgpd and its protos; BIRD and FRR as peers), QEMU with busybox and ipvsadm for
# the guest tier that has the kernel features the host lacks (IPVS, dummy, ipip), promtool for the alert rules,
# kubectl for the API server tests, then the npm workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(iptables ipset nftables iproute2 conntrack prometheus ca-certificates
  gobgpd golang-github-osrg-gobgp-dev bird2 frr
  qemu-system-x86 busybox-static ipvsadm cpio kmod)
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

npm ci --no-audit --no-fund
