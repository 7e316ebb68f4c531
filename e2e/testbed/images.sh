#!/usr/bin/env bash
# Container images built on this machine without Docker and pushed to the testbed's registry
# ($REGISTRY): a root filesystem directory becomes one layer (a reproducible tar: sorted names,
# numeric owners, mtime 0), crane puts it on an empty (scratch) base and sets the image config.
# The tag is the layer's digest, so an unchanged image keeps its tag and a changed one gets a new
# tag (the node never runs a stale image cached under an old tag).
# Sourced by node.sh, olm.sh and push-images.sh, never run directly.

crane_cmd() {
  local bin
  bin=$(crane_bin) || die "crane missing: run e2e/testbed/build.sh node"
  "$bin" --insecure "$@"
}

# rootfs_layer ROOTFS OUT_TAR: the reproducible layer of a root filesystem directory.
rootfs_layer() {
  local rootfs=$1 out=$2
  tar --create --file "$out" --directory "$rootfs" --sort=name --numeric-owner \
    --mtime=@0 --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    .
}

# push_rootfs_image REPOSITORY ROOTFS [crane mutate flags...]: builds and pushes the image
# (unless the registry has that tag already) and prints its reference REGISTRY/REPOSITORY:TAG.
# Mutate flags: --entrypoint=a,b --cmd=... --user=... --workdir=... --env=K=V --label=K=V.
push_rootfs_image() {
  local repository=$1 rootfs=$2; shift 2
  local work tag digest ref
  work=$(mktemp -d)
  rootfs_layer "$rootfs" "$work/layer.tar"
  # The tag: the layer and the config flags together.
  digest=$( { sha256sum <"$work/layer.tar"; printf '%s\n' "$@"; } | sha256sum | cut -c1-16)
  tag="c-$digest"
  ref="$REGISTRY/$repository:$tag"
  if ! crane_cmd manifest "$ref" >/dev/null 2>&1; then
    crane_cmd append --oci-empty-base --new_layer "$work/layer.tar" --new_tag "$ref" >/dev/null 2>>"$RUN_DIR/logs/crane.log"
    # The node's runtime picks images by platform: say it.
    crane_cmd mutate "$ref" --set-platform linux/amd64 "$@" --tag "$ref" >/dev/null 2>>"$RUN_DIR/logs/crane.log"
    log "pushed $ref ($(du -h "$work/layer.tar" | cut -f1) layer)"
  fi
  rm -rf "$work"
  echo "$ref"
}

# The sandbox (pause) image: e2e/images/pause/pause.c, static, alone on scratch.
build_pause_image() {
  local dir=$RUN_DIR/images/pause
  rm -rf "$dir" && mkdir -p "$dir/rootfs"
  gcc -static -O2 -s -o "$dir/rootfs/pause" "$REPO_ROOT/e2e/images/pause/pause.c"
  push_rootfs_image testbed/pause "$dir/rootfs" --entrypoint=/pause --user=65535:65535 >"$RUN_DIR/images/pause.ref"
}

# The local-path provisioner's helper image: Debian's busybox-static as sh, mkdir and rm.
build_helper_image() {
  local dir=$RUN_DIR/images/helper busybox
  busybox=$(command -v busybox) || die "busybox missing: apt-get install busybox-static"
  file -L "$busybox" 2>/dev/null | grep -q 'statically linked' \
    || die "$busybox is not statically linked: apt-get install busybox-static"
  rm -rf "$dir" && mkdir -p "$dir/rootfs/bin"
  cp "$busybox" "$dir/rootfs/bin/busybox"
  local applet
  for applet in sh mkdir rm ls cat echo sleep id touch httpd nc nslookup awk printf; do ln -s busybox "$dir/rootfs/bin/$applet"; done
  push_rootfs_image testbed/helper "$dir/rootfs" --entrypoint=/bin/sh >"$RUN_DIR/images/helper.ref"
}

# OLM's image, as upstream's Containerfile lays it out: its commands in /bin, and `cp` (the bundle
# unpack Jobs' init container runs `/bin/cp -Rv /bin/cpb /util/cpb` in it): Debian's
# busybox-static, where upstream has distroless's busybox. Non-root (1001, as upstream).
build_olm_image() {
  local dir=$RUN_DIR/images/olm olm busybox
  olm=$(olm_dir) || die "OLM missing: run e2e/testbed/build.sh olm"
  busybox=$(command -v busybox) || die "busybox missing: apt-get install busybox-static"
  rm -rf "$dir" && mkdir -p "$dir/rootfs/bin" "$dir/rootfs/tmp"
  cp "$olm"/bin/{olm,catalog,copy-content,cpb} "$dir/rootfs/bin/"
  cp "$busybox" "$dir/rootfs/bin/busybox"
  ln -s busybox "$dir/rootfs/bin/cp"
  chmod 1777 "$dir/rootfs/tmp"
  push_rootfs_image operator-framework/olm "$dir/rootfs" --entrypoint=/bin/olm --user=1001 \
    --env=PATH=/bin >"$RUN_DIR/images/olm.ref"
}

# The image OLM's bundle unpack Jobs run `opm alpha bundle extract` in (`opm` from PATH): the
# testbed's opm alone, where upstream pulls quay.io/operator-framework/opm.
build_opm_image() {
  local dir=$RUN_DIR/images/opm opm
  opm=$(opm_bin) || die "opm missing: run e2e/testbed/build.sh tools"
  rm -rf "$dir" && mkdir -p "$dir/rootfs/bin"
  cp "$opm" "$dir/rootfs/bin/opm"
  push_rootfs_image operator-framework/opm "$dir/rootfs" --entrypoint=/bin/opm --user=1001 \
    --env=PATH=/bin >"$RUN_DIR/images/opm.ref"
}

push_node_images() {
  mkdir -p "$RUN_DIR/images"
  build_pause_image
  build_helper_image
}

pause_image() { cat "$RUN_DIR/images/pause.ref"; }
helper_image() { cat "$RUN_DIR/images/helper.ref"; }
olm_image() { cat "$RUN_DIR/images/olm.ref"; }
opm_image() { cat "$RUN_DIR/images/opm.ref"; }
