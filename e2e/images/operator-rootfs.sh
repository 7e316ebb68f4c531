#!/usr/bin/env bash
# The root filesystem of an operator image: the last step of the builder stage of
# cluster-operator/Containerfile and resources-operator/Containerfile, and what
# e2e/testbed/push-images.sh puts on scratch for the testbed, so both make the same tree.
#
# Usage: operator-rootfs.sh NAME BINARY OUT_DIR
#   NAME     cluster-operator or resources-operator
#   BINARY   its static build (target/x86_64-unknown-linux-gnu/release/NAME, see the Containerfiles)
#   OUT_DIR  created here (absent or empty), owned by root:
#              usr/local/bin/NAME                  0755, the binary
#              etc/ssl/certs/ca-certificates.crt   0644, the Mozilla CA set of Debian's ca-certificates
#
# Nothing else: the binary links glibc statically, and glibc 2.36 (Debian bookworm, the builder
# image's) resolves names with its built-in `files` and `dns` sources and, without an
# /etc/nsswitch.conf, in the order `hosts: files dns`, so no libnss_*.so and no nsswitch.conf;
# the kubelet mounts /etc/resolv.conf and /etc/hosts. The CA bundle is there because the
# Infinispan REST client loads the system roots whenever no CA bundle is configured, even for
# an http:// URL, and fails to start without any ("no native root CA certificates found").
# The bundle is made here from the package's certificates (sorted), not copied from /etc/ssl:
# the same bytes on every machine with the same package version, and no CA a machine added
# locally (update-ca-certificates puts /usr/local/share/ca-certificates in /etc/ssl's bundle).
set -euo pipefail

die() { echo "operator-rootfs.sh: $*" >&2; exit 1; }

(($# == 3)) || die "usage: operator-rootfs.sh NAME BINARY OUT_DIR"
name=$1 binary=$2 out=$3
ca_dir=/usr/share/ca-certificates/mozilla

case $name in
  cluster-operator | resources-operator) ;;
  *) die "NAME must be cluster-operator or resources-operator, not '$name'" ;;
esac
[[ -f $binary ]] || die "no binary at $binary"
# A dynamic binary (target/release) would start nowhere on scratch: it names a program
# interpreter (ld-linux), a static one does not.
if readelf --program-headers "$binary" | grep -q 'Requesting program interpreter'; then
  die "$binary is dynamically linked: build it with RUSTFLAGS='-C target-feature=+crt-static' and --target"
fi
shopt -s nullglob
certificates=("$ca_dir"/*.crt)
((${#certificates[@]})) || die "no certificates in $ca_dir: install Debian's ca-certificates package"
[[ ! -e $out || -z $(ls -A "$out") ]] || die "$out exists and is not empty"
((EUID == 0)) || die "run as root: the image's files are owned by root"

install -d -m 0755 -o 0 -g 0 "$out" "$out/usr" "$out/usr/local" "$out/usr/local/bin" \
  "$out/etc" "$out/etc/ssl" "$out/etc/ssl/certs"
install -m 0755 -o 0 -g 0 "$binary" "$out/usr/local/bin/$name"
# Concatenated in the C locale's byte order, whatever the caller's locale (a glob follows it).
printf '%s\n' "${certificates[@]}" | LC_ALL=C sort | xargs -d '\n' cat >"$out/etc/ssl/certs/ca-certificates.crt"
chown 0:0 "$out/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$out/etc/ssl/certs/ca-certificates.crt"
echo "operator-rootfs.sh: $out holds $name ($(du -h "$binary" | cut -f1)) and ${#certificates[@]} CA certificates"
