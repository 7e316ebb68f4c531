#!/usr/bin/env bash
# Builds the images users run and pushes them to the testbed's registry, without Docker and
# without pulling anything. Usage: push-images.sh [operators|server|olm|all] (default all).
#
#   operators  both operators as static binaries (`make release-static`), each alone on a scratch
#              image whose config (USER, ENTRYPOINT, LABEL, ENV, WORKDIR) is read from the final
#              stage of its Containerfile: the stage a user's `podman build` runs too, on the same
#              root filesystem (e2e/images/operator-rootfs.sh is the builder stage's last step)
#   server     the Infinispan server image (e2e/images/server: Debian's Java 17 runtime and the
#              server assembled from Maven Central, the official image's entry-point contract)
#   olm        the OLM bundle image (olm/bundle's files on scratch, the labels of
#              olm/bundle.Containerfile) and the catalog image (olm/catalog served by opm, its
#              serve cache built at image build time, entry point, command and label of
#              olm/catalog.Containerfile's final stage; opm and grpc_health_probe are the testbed's
#              builds of the versions the upstream opm image carries, which cannot be pulled here; the catalog's bundle
#              entry names the bundle image pushed here, as a user's catalog names theirs); and
#              the same pair for the node's OLM ("local"): the bundle's CSV naming the operator
#              and server images pushed here instead of quay.io's, as a mirror rewrites them
#              (needs `operators` and `server` pushed first)
#
# Writes $RUN_DIR/images.env (`source` it; up.sh adds it to the testbed's env file):
#   TESTBED_CLUSTER_OPERATOR_IMAGE, TESTBED_RESOURCES_OPERATOR_IMAGE, TESTBED_SERVER_IMAGE and
#   TESTBED_SERVER_IMAGE_B (the same server, another tag), TESTBED_OLM_BUNDLE_IMAGE and
#   TESTBED_OLM_CATALOG_IMAGE (as published), TESTBED_OLM_LOCAL_BUNDLE_IMAGE and
#   TESTBED_OLM_LOCAL_CATALOG_IMAGE (the images built here in the CSV)
# each REGISTRY/REPOSITORY:TAG with a content tag (see images.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTBED_DIR/images.sh"

curl -sf "http://$REGISTRY/v2/" >/dev/null \
  || die "the testbed's registry does not answer on $REGISTRY: start the testbed with its node (make testbed-up)"

IMAGES_ENV=$RUN_DIR/images.env
touch "$IMAGES_ENV"

# set_image VAR REF: records VAR=REF in images.env (replacing an older value).
set_image() {
  local var=$1 ref=$2
  grep -v "^export $var=" "$IMAGES_ENV" >"$IMAGES_ENV.new" || true
  echo "export $var=\"$ref\"" >>"$IMAGES_ENV.new"
  mv "$IMAGES_ENV.new" "$IMAGES_ENV"
}

# containerfile_config CONTAINERFILE [olm]: the crane mutate flags of the final stage's config
# instructions. The final stage may hold only FROM scratch, LABEL, COPY --from=builder
# /out/rootfs/ /, USER, ENV, WORKDIR, ENTRYPOINT and CMD: anything else is an error, so the
# image built here cannot drift from the one `podman build` makes. With `olm`, the final stage
# may start from another base and COPY other paths (the caller puts those files in the root
# filesystem itself, and the OLM tests compare the image's files with the sources).
containerfile_config() {
  python3 - "$1" "${2:-}" <<'PY'
import json, re, shlex, sys
path, mode = sys.argv[1], sys.argv[2]
lines, buf = [], ""
for raw in open(path):
    line = raw.rstrip("\n")
    if not buf and (not line.strip() or line.lstrip().startswith("#")):
        continue
    if line.endswith("\\"):
        buf += line[:-1] + " "
        continue
    lines.append((buf + line).strip())
    buf = ""
starts = [i for i, l in enumerate(lines) if l.split()[0].upper() == "FROM"]
final = lines[starts[-1]:]
if final[0].split()[1:] != ["scratch"] and mode != "olm":
    sys.exit(f"{path}: the final stage must be FROM scratch, found: {final[0]}")
flags = []
for l in final[1:]:
    word, _, rest = l.partition(" ")
    word, rest = word.upper(), rest.strip()
    if word == "LABEL":
        for pair in shlex.split(rest):
            # crane reads label flags as CSV: quote the pair, its value may hold commas.
            quoted = pair.replace('"', '""')
            flags.append(f'--label="{quoted}"')
    elif word == "USER":
        flags.append(f"--user={rest}")
    elif word == "WORKDIR":
        flags.append(f"--workdir={rest}")
    elif word == "ENV":
        for pair in shlex.split(rest):
            flags.append(f"--env={pair}")
    elif word in ("ENTRYPOINT", "CMD"):
        args = json.loads(rest)
        if any("," in a for a in args):
            sys.exit(f"{path}: {word} arguments with commas are not supported here")
        flags.append(f"--{word.lower()}={','.join(args)}")
    elif word == "COPY":
        if rest != "--from=builder /out/rootfs/ /" and mode != "olm":
            sys.exit(f"{path}: the final stage copies only the builder's /out/rootfs/, found: COPY {rest}")
    else:
        sys.exit(f"{path}: {word} is not allowed in the final stage")
print("\n".join(flags))
PY
}

operators() {
  log "building both operators as static binaries (make release-static)"
  make -C "$REPO_ROOT" --no-print-directory release-static >&2
  local target_dir=${CARGO_TARGET_DIR:-$REPO_ROOT/target} name var ref flags=()
  for name in cluster-operator resources-operator; do
    local rootfs=$RUN_DIR/images/$name/rootfs
    rm -rf "$rootfs" && mkdir -p "$(dirname "$rootfs")"
    "$REPO_ROOT/e2e/images/operator-rootfs.sh" "$name" \
      "$target_dir/x86_64-unknown-linux-gnu/release/$name" "$rootfs" >&2
    mapfile -t flags < <(containerfile_config "$REPO_ROOT/$name/Containerfile")
    ref=$(push_rootfs_image "infinispan-operators/$name" "$rootfs" "${flags[@]}")
    var=TESTBED_${name//-/_}_IMAGE
    set_image "${var^^}" "$ref"
    log "$name image: $ref"
  done
}

server() {
  "$REPO_ROOT/e2e/images/server/build-rootfs.sh" >&2
  local v dir ref
  v=$(cat "$(infinispan_home)/VERSION")
  dir=$PROJECT_CACHE/server-image-$v-bookworm
  [[ -f $dir/.complete ]] || die "the server image's root filesystem was not built ($dir)"
  # shellcheck disable=SC1091
  source "$dir/image.env"
  local flags=(--user="$IMAGE_USER" --workdir="$IMAGE_WORKDIR"
    --entrypoint="$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])))' "$IMAGE_ENTRYPOINT")")
  local env
  while read -r env; do
    [[ -n $env ]] && flags+=(--env="$env")
  done <<<"$IMAGE_ENV"
  ref=$(push_rootfs_image infinispan/server "$dir/rootfs" "${flags[@]}")
  set_image TESTBED_SERVER_IMAGE "$ref"
  log "Infinispan $v server image: $ref"
  # The same server under a second tag (one more label: another config, another digest), for the
  # tests that roll a cluster from one image to another; its layer is the same blob.
  ref=$(push_rootfs_image infinispan/server "$dir/rootfs" "${flags[@]}" --label=org.infinispan-operators.testbed.variant=b)
  set_image TESTBED_SERVER_IMAGE_B "$ref"
}

# olm_bundle_and_catalog PREFIX [local]: the bundle image and the catalog image that names it;
# records PREFIX_BUNDLE_IMAGE and PREFIX_CATALOG_IMAGE. With `local`, the bundle is olm/bundle
# with the images of its CSV (the operator's Deployment, its environment, relatedImages) replaced
# by the images pushed here, as a mirror rewrites them: the bundle OLM installs on the node,
# whose operator pod runs the image built here (nothing else can be pulled). Without, the bundle
# is olm/bundle as it is published.
olm_bundle_and_catalog() {
  local prefix=$1 mode=${2:-} flags=() bundle catalog
  local rootfs=$RUN_DIR/images/olm-bundle${mode:+-$mode}/rootfs
  rm -rf "$rootfs" && mkdir -p "$rootfs"
  # COPY manifests /manifests/ and COPY metadata /metadata/ of olm/bundle.Containerfile.
  cp -r "$REPO_ROOT/olm/bundle/manifests" "$REPO_ROOT/olm/bundle/metadata" "$rootfs/"
  if [[ $mode == local ]]; then
    mirror_images "$rootfs/manifests/infinispan-operator.clusterserviceversion.yaml"
  fi
  mapfile -t flags < <(containerfile_config "$REPO_ROOT/olm/bundle.Containerfile" olm)
  bundle=$(push_rootfs_image infinispan-operators/infinispan-operator-bundle "$rootfs" "${flags[@]}")
  set_image "${prefix}_BUNDLE_IMAGE" "$bundle"
  log "OLM bundle image${mode:+ ($mode)}: $bundle"

  rootfs=$RUN_DIR/images/olm-catalog${mode:+-$mode}/rootfs
  rm -rf "$rootfs" && mkdir -p "$rootfs/configs"
  cp -r "$REPO_ROOT/olm/catalog/." "$rootfs/configs/"
  local fbc=$rootfs/configs/infinispan-operator/catalog.yaml
  grep -q '^image: quay.io/infinispan-operators/infinispan-operator-bundle:' "$fbc" \
    || die "$fbc has no bundle image line to point at the bundle pushed here"
  sed -i "s|^image: quay.io/infinispan-operators/infinispan-operator-bundle:.*|image: $bundle|" "$fbc"
  if [[ $mode == local ]]; then
    mirror_images "$fbc"
  fi
  catalog=$(push_catalog "olm-catalog${mode:+-$mode}")
  set_image "${prefix}_CATALOG_IMAGE" "$catalog"
  log "OLM catalog image${mode:+ ($mode)}: $catalog"
}

# push_catalog NAME: the catalog image of $RUN_DIR/images/NAME/rootfs/configs (a file-based
# catalog), laid out as olm/catalog.Containerfile's final stage: opm and grpc_health_probe in
# /bin (the testbed's builds of the versions the upstream opm base image carries), the serve
# cache built at image build time, its config. Prints the image reference.
push_catalog() {
  local name=$1 rootfs=$RUN_DIR/images/$1/rootfs flags=() catalog
  mkdir -p "$rootfs/bin" "$rootfs/tmp"
  cp "$(opm_bin)" "$rootfs/bin/opm"
  # The upstream opm image's probe, which OLM's catalog pods run (build.sh tools).
  cp "$(grpc_health_probe_bin || die "grpc_health_probe missing: run e2e/testbed/build.sh tools")" "$rootfs/bin/"
  mapfile -t flags < <(containerfile_config "$REPO_ROOT/olm/catalog.Containerfile" olm)
  # The serve cache is not byte-for-byte reproducible (its layer, hence its tag, changes with
  # every build): the image is rebuilt only when what it is made from changed (opm, the probe,
  # the catalog, the config), recorded in $RUN_DIR/images/NAME.inputs.
  local inputs record=$RUN_DIR/images/$name.inputs
  inputs=$( {
    sha256sum "$rootfs/bin/opm" "$rootfs/bin/grpc_health_probe"
    (cd "$rootfs" && find configs -type f | sort | xargs sha256sum)
    printf '%s\n' "${flags[@]}"
  } | sha256sum | cut -c1-16)
  if [[ -f $record ]] && [[ $(head -1 "$record") == "$inputs" ]] \
    && crane_cmd manifest "$(tail -1 "$record")" >/dev/null 2>&1; then
    catalog=$(tail -1 "$record")
  else
    # The builder stage's RUN: the serve cache, so that the catalog pod starts without building it.
    "$rootfs/bin/opm" serve "$rootfs/configs" --cache-dir="$rootfs/tmp/cache" --cache-only >&2
    chmod -R a+rX "$rootfs"
    catalog=$(push_rootfs_image infinispan-operators/infinispan-operator-catalog "$rootfs" "${flags[@]}")
    printf '%s\n%s\n' "$inputs" "$catalog" >"$record"
  fi
  echo "$catalog"
}

# The upgrade test's catalog (TESTBED_OLM_UPGRADE_CATALOG_IMAGE): the node's bundle (0.1.0) and
# a 0.1.1 made from it (the CSV renamed infinispan-operator.v0.1.1, version 0.1.1, `replaces:
# infinispan-operator.v0.1.0`; same operator image), both in the channel, 0.1.1 its head. The
# bundle entries are what `opm render` gives for the bundles (as a catalog maintainer adds a
# release); needs the local pair (olm_bundle_and_catalog ... local) first.
olm_upgrade_catalog() {
  local from=$RUN_DIR/images/olm-bundle-local/rootfs rootfs=$RUN_DIR/images/olm-bundle-upgrade/rootfs
  local flags=() bundle catalog opm
  opm=$(opm_bin)
  [[ -d $from ]] || die "the node's bundle was not built (push-images.sh olm)"
  rm -rf "$rootfs" && mkdir -p "$(dirname "$rootfs")" && cp -r "$from" "$rootfs"
  local csv=$rootfs/manifests/infinispan-operator.clusterserviceversion.yaml
  grep -q '^  name: infinispan-operator.v0.1.0$' "$csv" && grep -q '^  version: "0.1.0"$' "$csv" \
    || die "$csv: no 0.1.0 name and version to make 0.1.1 of"
  sed -i -e 's/^  name: infinispan-operator.v0.1.0$/  name: infinispan-operator.v0.1.1/' \
    -e 's/^  version: "0.1.0"$/  replaces: infinispan-operator.v0.1.0\n  version: "0.1.1"/' "$csv"
  mapfile -t flags < <(containerfile_config "$REPO_ROOT/olm/bundle.Containerfile" olm)
  bundle=$(push_rootfs_image infinispan-operators/infinispan-operator-bundle "$rootfs" "${flags[@]}")
  set_image TESTBED_OLM_UPGRADE_BUNDLE_IMAGE "$bundle"

  local configs=$RUN_DIR/images/olm-catalog-upgrade/rootfs/configs
  rm -rf "$(dirname "$configs")" && mkdir -p "$configs/infinispan-operator"
  python3 - "$bundle" "$configs/infinispan-operator/catalog.json" \
    <("$opm" render "$RUN_DIR/images/olm-catalog-local/rootfs/configs" -o json) \
    <("$opm" render "$rootfs" --migrate-level=bundle-object-to-csv-metadata -o json) <<'PY'
import json, sys
bundle_image, target, current, new = sys.argv[1:5]
def documents(path):
    text, decoder, docs, i = open(path).read(), json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        doc, i = decoder.raw_decode(text, i)
        docs.append(doc)
    return docs
docs = documents(current)
[upgrade] = documents(new)
upgrade["image"] = bundle_image
[channel] = [d for d in docs if d["schema"] == "olm.channel"]
channel["entries"].append({"name": upgrade["name"], "replaces": channel["entries"][-1]["name"]})
with open(target, "w") as out:
    for doc in docs + [upgrade]:
        out.write(json.dumps(doc, indent=2) + "\n")
PY
  "$opm" validate "$configs" >&2
  catalog=$(push_catalog olm-catalog-upgrade)
  set_image TESTBED_OLM_UPGRADE_CATALOG_IMAGE "$catalog"
  log "OLM upgrade catalog image (0.1.0 -> 0.1.1): $catalog"
}

# mirror_images FILE: replaces, in FILE, each image the CSV names (its relatedImages: the two
# operators and the server of each version) by the image pushed here; fails when one has none.
mirror_images() {
  local file=$1
  # shellcheck disable=SC1090
  source "$IMAGES_ENV"
  [[ -n ${TESTBED_CLUSTER_OPERATOR_IMAGE:-} && -n ${TESTBED_RESOURCES_OPERATOR_IMAGE:-} && -n ${TESTBED_SERVER_IMAGE:-} ]] \
    || die "the OLM bundle for the node names the operator and server images pushed here: push them first (push-images.sh operators, push-images.sh server)"
  python3 - "$REPO_ROOT/olm/bundle/manifests/infinispan-operator.clusterserviceversion.yaml" "$file" <<'PY'
import os, re, sys
csv, path = sys.argv[1], sys.argv[2]
# The CSV's relatedImages, as `make crds` writes them: `  - image: REF` then `    name: NAME`.
related = {name: ref for ref, name in
           re.findall(r"^  - image: (\S+)\n    name: (\S+)$", open(csv).read(), re.M)}
local = {
    "cluster-operator": os.environ["TESTBED_CLUSTER_OPERATOR_IMAGE"],
    "resources-operator": os.environ["TESTBED_RESOURCES_OPERATOR_IMAGE"],
}
text = open(path).read()
for name, ref in related.items():
    if name in local:
        new = local[name]
    elif name.startswith("infinispan-server-"):
        new = os.environ["TESTBED_SERVER_IMAGE"]
    else:
        sys.exit(f"{csv}: no image built here for the related image {name} ({ref})")
    text = text.replace(ref, new)
if related.get("cluster-operator", "-") in text or "cluster-operator" not in related:
    sys.exit(f"{path}: the operator's image was not replaced (related images: {related})")
open(path, "w").write(text)
PY
}

# operator-sdk scorecard's pods, built here (their upstream images are on quay.io): the
# scorecard-test command (build.sh tools) at /usr/local/bin as upstream's image has it, and one
# busybox image (Debian's busybox-static: tar with gzip, sh, sleep) as both the untar init
# container (`tar xvzf ...`: no entry point, as upstream's ubi image) and the storage sidecar.
scorecard_images() {
  local dir=$RUN_DIR/images/scorecard-test busybox applet ref
  rm -rf "$dir" && mkdir -p "$dir/rootfs/usr/local/bin" "$dir/rootfs/opt/scorecard-test"
  cp "$(scorecard_test_bin || die "scorecard-test missing: run e2e/testbed/build.sh tools")" "$dir/rootfs/usr/local/bin/"
  ref=$(push_rootfs_image operator-framework/scorecard-test "$dir/rootfs" \
    --entrypoint=/usr/local/bin/scorecard-test --user=1001 --workdir=/opt/scorecard-test \
    --env=HOME=/opt/scorecard-test)
  set_image TESTBED_SCORECARD_TEST_IMAGE "$ref"
  dir=$RUN_DIR/images/scorecard-untar
  busybox=$(command -v busybox) || die "busybox missing: apt-get install busybox-static"
  rm -rf "$dir" && mkdir -p "$dir/rootfs/bin" "$dir/rootfs/opt/scorecard-untar"
  cp "$busybox" "$dir/rootfs/bin/busybox"
  for applet in sh tar gzip sleep; do ln -s busybox "$dir/rootfs/bin/$applet"; done
  ref=$(push_rootfs_image operator-framework/scorecard-untar "$dir/rootfs" --user=1001 \
    --workdir=/opt/scorecard-untar --env=PATH=/bin --env=HOME=/opt/scorecard-untar)
  set_image TESTBED_SCORECARD_UNTAR_IMAGE "$ref"
  log "operator-sdk scorecard images: $(grep -c SCORECARD "$IMAGES_ENV") recorded"
}

olm() {
  scorecard_images
  olm_bundle_and_catalog TESTBED_OLM
  olm_bundle_and_catalog TESTBED_OLM_LOCAL local
  olm_upgrade_catalog
}

case ${1:-all} in
  operators) operators ;;
  server) server ;;
  olm) olm ;;
  all) server; operators; olm ;;
  *) die "usage: push-images.sh [operators|server|olm|all]" ;;
esac
