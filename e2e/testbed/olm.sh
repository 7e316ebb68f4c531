#!/usr/bin/env bash
# OLM (operator-lifecycle-manager) on the testbed's node, as pods from an image built here.
# Usage: olm.sh up|down|status. up.sh runs `olm.sh up` after the node (unless TESTBED_NODE=0 or
# TESTBED_OLM=0); it is idempotent and takes a few seconds when nothing changed.
#
# What `up` installs is upstream's own release: the chart of the pinned module
# (`$PROJECT_CACHE/olm-<v>/chart`, from build.sh olm) rendered the way upstream renders its
# release manifests (`helm template` with deploy/upstream/values.yaml: namespaces `olm` under the
# restricted Pod Security profile and `operators` under baseline, the OLM CRDs, the olm-operator
# and catalog-operator Deployments, their ServiceAccount and ClusterRole, the default
# OperatorGroups, OLM's NetworkPolicies), with the testbed's values on top:
#   - the images built here: OLM's ($REGISTRY/operator-framework/olm, images.sh build_olm_image)
#     for both operators and as the bundle unpack Jobs' `-util-image`, and the testbed's opm
#     ($REGISTRY/operator-framework/opm) as their `-opmImage`;
#   - no `operatorhubio-catalog` CatalogSource (its image is on quay.io, which the node cannot
#     reach);
#   - the API server's port in OLM's NetworkPolicies: the testbed's API server listens on
#     $APISERVER_PORT, not 6443 (the `kubernetes` Service's endpoint), and kube-router enforces
#     the policies on the port after the Service's translation.
# Left out: the packageserver (an aggregated API server for PackageManifests: `kubectl get
# packagemanifests` is the only thing it serves; the CatalogSource -> Subscription -> InstallPlan
# -> CSV flow does not use it, and the testbed's API server has no front-proxy (requestheader)
# configuration for aggregated APIs): its ClusterServiceVersion and NetworkPolicy are dropped
# from the rendered manifests.
# Added: one NetworkPolicy in `olm` that lets the bundle unpack Jobs reach the API server on
# $APISERVER_PORT (the catalog operator's own policy for them allows TCP 6443 only, hard-coded).
#
# RBAC is upstream's: the ClusterRole `system:controller:operator-lifecycle-manager` allows every
# verb on every resource. OLM needs that by nature: it creates the CRDs, ServiceAccounts, Roles
# and ClusterRoles that each installed operator's CSV asks for (escalate and bind included).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTBED_DIR/images.sh"

OLM_RUN_DIR=$RUN_DIR/olm
OLM_NAMESPACE=olm
OLM_MANAGER=testbed-olm

kubectl_admin() { "$(k8s_bin_dir)/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" "$@"; }

olm_version() { installed_version olm "$OLM_VERSIONS"; }

# render: $OLM_RUN_DIR/olm.yaml, upstream's chart with the testbed's values (see above).
render() {
  local chart helm
  chart=$(olm_dir)/chart
  helm=$(helm_bin) || die "helm missing: run e2e/testbed/build.sh tools"
  mkdir -p "$OLM_RUN_DIR"
  cat >"$OLM_RUN_DIR/values.yaml" <<YAML
# The testbed's values over upstream's deploy/upstream/values.yaml (written by olm.sh).
installType: testbed
olm:
  image: {ref: "$(olm_image)", pullPolicy: IfNotPresent}
catalog:
  image: {ref: "$(olm_image)", pullPolicy: IfNotPresent}
  opmImageArgs: --opmImage=$(opm_image)
networkPolicy:
  kubeAPIServer:
    ports: [{protocol: TCP, port: $APISERVER_PORT}]
YAML
  HELM_CONFIG_HOME=$OLM_RUN_DIR/helm HELM_CACHE_HOME=$OLM_RUN_DIR/helm HELM_DATA_HOME=$OLM_RUN_DIR/helm \
    "$helm" template olm "$chart" --namespace "$OLM_NAMESPACE" \
    -f "$chart/upstream-values.yaml" -f "$OLM_RUN_DIR/values.yaml" >"$OLM_RUN_DIR/chart.yaml"
  # Documents are split on helm's `---` lines and told apart by kind and name (plain text: the
  # testbed's Python has no YAML module).
  python3 - "$OLM_RUN_DIR/chart.yaml" "$OLM_RUN_DIR/olm.yaml" "$OLM_NAMESPACE" "$APISERVER_PORT" <<'PY'
import json, re, sys
source, target, namespace, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
dropped = {("ClusterServiceVersion", "packageserver"), ("NetworkPolicy", "packageserver")}
def identity(doc):
    kind = re.search(r"^kind: (\S+)$", doc, re.M)
    name = re.search(r"^  name: (\S+)$", doc, re.M)
    return (kind and kind.group(1), name and name.group(1))
docs = [d for d in re.split(r"^---$", open(source).read(), flags=re.M) if re.search(r"^kind:", d, re.M)]
kept = [d for d in docs if identity(d) not in dropped]
if len(docs) - len(kept) != len(dropped):
    sys.exit(f"upstream's chart no longer renders {sorted(dropped)} as expected: review olm.sh")
kept.append("\n" + json.dumps({
    "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
    "metadata": {"name": "testbed-unpack-bundles-apiserver", "namespace": namespace},
    "spec": {
        "podSelector": {"matchExpressions": [
            {"key": "operatorframework.io/bundle-unpack-ref", "operator": "Exists"},
            {"key": "olm.managed", "operator": "In", "values": ["true"]},
        ]},
        "policyTypes": ["Egress"],
        "egress": [{"ports": [{"protocol": "TCP", "port": port}]}],
    },
}, indent=2) + "\n")
with open(target, "w") as out:
    out.write("---".join(kept))
PY
}

deployments_ready() {
  local name ready
  for name in olm-operator catalog-operator; do
    ready=$(kubectl_admin -n "$OLM_NAMESPACE" get deployment "$name" \
      -o jsonpath='{.status.readyReplicas}/{.status.replicas}/{.status.updatedReplicas}' 2>/dev/null) || return 1
    [[ $ready == 1/1/1 ]] || return 1
  done
}

up() {
  local v started=$SECONDS
  v=$(olm_version) || die "OLM is not built: run e2e/testbed/build.sh olm"
  curl -sf "http://$REGISTRY/v2/" >/dev/null \
    || die "the testbed's registry does not answer on $REGISTRY: OLM needs the node (make testbed-up)"
  mkdir -p "$RUN_DIR/images" "$RUN_DIR/logs" "$OLM_RUN_DIR"
  build_olm_image
  build_opm_image
  render
  # The CRDs first, established before the objects of their kinds (OLMConfig, OperatorGroups).
  kubectl_admin apply --server-side --force-conflicts --field-manager "$OLM_MANAGER" \
    -f "$(olm_dir)/chart/crds" >/dev/null
  kubectl_admin wait --for condition=Established --timeout 60s -f "$(olm_dir)/chart/crds" >/dev/null
  kubectl_admin apply --server-side --force-conflicts --field-manager "$OLM_MANAGER" \
    -f "$OLM_RUN_DIR/olm.yaml" >/dev/null
  local deadline=$((SECONDS + 180))
  until deployments_ready; do
    if ((SECONDS >= deadline)); then
      kubectl_admin -n "$OLM_NAMESPACE" get deployments,pods -o wide >&2 || true
      kubectl_admin -n "$OLM_NAMESPACE" describe pods >&2 || true
      die "OLM's operators are not Ready after 180s"
    fi
    sleep 1
  done
  log "OLM $v is Ready in namespace $OLM_NAMESPACE (olm-operator, catalog-operator from $(olm_image); $((SECONDS - started))s)"
}

# down: uninstalls OLM (its operators, then every object of its kinds with its CRDs, then its
# namespaces and cluster objects). Operators OLM installed keep running: OLM does not remove an
# operator's Deployment when its own CRDs go, only when a CSV is deleted.
down() {
  [[ -f $OLM_RUN_DIR/olm.yaml ]] || { log "OLM was not installed by this testbed"; return 0; }
  kubectl_admin -n "$OLM_NAMESPACE" delete deployment olm-operator catalog-operator --ignore-not-found >/dev/null
  kubectl_admin delete -f "$(olm_dir)/chart/crds" --ignore-not-found --timeout 120s >/dev/null
  kubectl_admin delete -f "$OLM_RUN_DIR/olm.yaml" --ignore-not-found --timeout 120s >/dev/null 2>&1 || true
  rm -f "$OLM_RUN_DIR/olm.yaml"
  log "OLM removed"
}

status() {
  if deployments_ready; then
    kubectl_admin -n "$OLM_NAMESPACE" get deployments -o wide
  else
    echo "OLM is not Ready (or not installed): olm.sh up"
    kubectl_admin -n "$OLM_NAMESPACE" get deployments,pods -o wide 2>/dev/null || true
    return 1
  fi
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  render) render; echo "$OLM_RUN_DIR/olm.yaml" ;;
  *) die "usage: olm.sh up|down|status|render" ;;
esac
