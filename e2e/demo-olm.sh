#!/usr/bin/env bash
# `make demo-olm`: the operator installed the OLM way on this machine: OLM's own operators run as
# pods on the testbed's node (`e2e/testbed/olm.sh`, part of `make testbed-up`), our catalog image
# is served by a CatalogSource, a Subscription installs the operator, and an Infinispan CR gives a
# running cluster. Every part a pod from images built here (`make images`).
#
#   e2e/demo-olm.sh          run the demo and leave everything running (what `make demo-olm` does)
#   e2e/demo-olm.sh --ci     the same, non-interactive, every check fatal, and everything the demo
#                            made removed at the end (also DEMO_CI=1)
#   e2e/demo-olm.sh down     remove what the demo made (what `make demo-olm-down` does)
#
# The catalog is the node's (TESTBED_OLM_LOCAL_CATALOG_IMAGE): `olm/catalog` and `olm/bundle` with
# the operator and server images of the CSV replaced by those pushed here, as a mirror does.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=show
case ${1:-} in
  "") ;;
  --ci) MODE=ci ;;
  down) MODE=down ;;
  *) echo "usage: e2e/demo-olm.sh [--ci|down]" >&2; exit 2 ;;
esac
[[ ${DEMO_CI:-} == 1 && $MODE == show ]] && MODE=ci

RUN_DIR=${TESTBED_RUN_DIR:-$PWD/target/testbed}
NS=demo-olm                      # the namespace of the Infinispan CR, the operator's target
CLUSTER=demo                     # the Infinispan CR's name
OPERATOR_NS=infinispan-operator-olm
CATALOG=infinispan-operators-demo
OLM_NS=olm
PACKAGE=infinispan-operator
SERVER_VERSION=16.0.7

if [[ -t 1 ]]; then BOLD=$'\033[1m' GREEN=$'\033[32m' RED=$'\033[31m' PLAIN=$'\033[0m'; else BOLD='' GREEN='' RED='' PLAIN=''; fi
# show_and_apply NAMESPACE: print the YAML on stdin, then apply it there.
show_and_apply() {
  local yaml
  yaml=$(cat)
  printf '%s\n' "$yaml" | sed 's/^/    | /'
  kubectl apply -n "$1" -f - <<<"$yaml" >/dev/null
}
say() { printf '\n%s==> %s%s\n' "$BOLD" "$*" "$PLAIN"; }
note() { printf '    %s\n' "$*"; }
ok() { printf '    %sok%s %s\n' "$GREEN" "$PLAIN" "$*"; }
fail() {
  printf '\n%sFAILED: %s%s\n' "$RED" "$*" "$PLAIN" >&2
  {
    kubectl get -n "$OLM_NS" catalogsource "$CATALOG" -o jsonpath='{.status.connectionState}{"\n"}'
    kubectl get -n "$OPERATOR_NS" subscriptions,installplans,csv,pods -o wide
    kubectl get -n "$OLM_NS" pods,jobs -o wide
    kubectl get pods -n "$NS" -o wide
    printf -- '--- catalog operator log\n'
    kubectl logs -n "$OLM_NS" deployment/catalog-operator --tail=15
    printf -- '--- OLM operator log\n'
    kubectl logs -n "$OLM_NS" deployment/olm-operator --tail=15
    printf -- '--- cluster operator log\n'
    kubectl logs -n "$OPERATOR_NS" deployment/infinispan-cluster-operator --tail=20
    printf -- '--- events in %s\n' "$OPERATOR_NS"
    kubectl get events -n "$OPERATOR_NS" --sort-by=.lastTimestamp | tail -10
  } >&2 2>&1 || true
  exit 1
}
# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds, or fail saying WHAT did not happen.
wait_for() {
  local what=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what (waited ${seconds}s)"
    sleep 0.5
  done
  ok "$what"
}

[[ -f $RUN_DIR/env ]] || { echo "no testbed environment at $RUN_DIR/env: run 'make testbed-up' (or 'make demo-olm')" >&2; exit 1; }
# shellcheck disable=SC1091
source "$RUN_DIR/env"
[[ ${TESTBED_NODE:-0} == 1 && ${TESTBED_OLM:-1} == 1 ]] \
  || { echo "the testbed in $RUN_DIR has no node or no OLM (TESTBED_NODE=0 or TESTBED_OLM=0): start it with 'make testbed-up'" >&2; exit 1; }
[[ -f $RUN_DIR/images.env ]] || { echo "no images built for this testbed: run 'make images' (or 'make demo-olm')" >&2; exit 1; }
# shellcheck disable=SC1091
source "$RUN_DIR/images.env"
[[ -n ${TESTBED_OLM_LOCAL_CATALOG_IMAGE:-} ]] || { echo "no OLM catalog image for the node: run 'make images'" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "kubectl is missing: 'make testbed-up' links it into $RUN_DIR/bin" >&2; exit 1; }

# Everything the demo made, in the order that loses nothing: the Infinispan CR while the operator
# still runs (it drains and removes the cluster's objects), then the operator the OLM way (the
# Subscription, then the CSV: OLM removes the Deployment and its RBAC; the CRDs stay, as OLM keeps
# them), the namespaces, the CatalogSource.
down() {
  say "Removing the OLM demo"
  if kubectl get -n "$NS" infinispan "$CLUSTER" >/dev/null 2>&1; then
    kubectl delete -n "$NS" infinispan "$CLUSTER" --wait=true --timeout=180s >/dev/null \
      || note "the Infinispan CR was not deleted in 180 s"
  fi
  kubectl delete -n "$OPERATOR_NS" subscription "$PACKAGE" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete -n "$OPERATOR_NS" csv --all --ignore-not-found >/dev/null 2>&1 || true
  local namespace
  for namespace in "$NS" "$OPERATOR_NS"; do
    kubectl delete namespace "$namespace" --ignore-not-found --wait=true --timeout=180s >/dev/null
  done
  kubectl delete -n "$OLM_NS" catalogsource "$CATALOG" --ignore-not-found >/dev/null
  note "the testbed and OLM keep running: 'make testbed-down' stops them"
}

if [[ $MODE == down ]]; then
  down
  exit 0
fi

# A re-run starts clean.
if kubectl get namespace "$NS" >/dev/null 2>&1 || kubectl get namespace "$OPERATOR_NS" >/dev/null 2>&1 \
  || kubectl get -n "$OLM_NS" catalogsource "$CATALOG" >/dev/null 2>&1; then
  down
fi
on_exit() {
  local rc=$?
  down || true
  exit "$rc"
}
if [[ $MODE == ci ]]; then
  trap on_exit EXIT
fi

say "OLM on the testbed's node"
kubectl get -n "$OLM_NS" deployments -o wide
wait_for "OLM's olm-operator and catalog-operator are Available" 60 \
  kubectl wait -n "$OLM_NS" --for=condition=Available deployment/olm-operator deployment/catalog-operator --timeout=5s

say "A CatalogSource serving our catalog image (built here and pushed to the testbed's registry)"
show_and_apply "$OLM_NS" <<YAML
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: $CATALOG
spec:
  sourceType: grpc
  image: $TESTBED_OLM_LOCAL_CATALOG_IMAGE
  displayName: Infinispan operators
YAML
catalog_ready() {
  [[ $(kubectl get -n "$OLM_NS" catalogsource "$CATALOG" -o jsonpath='{.status.connectionState.lastObservedState}') == READY ]]
}
wait_for "the CatalogSource is READY (OLM runs it as a pod and connects to it)" 180 catalog_ready

say "An OperatorGroup in $OPERATOR_NS targeting $NS, and a Subscription to the channel alpha"
for namespace in "$NS" "$OPERATOR_NS"; do
  kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl label namespace "$namespace" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
done
note "both namespaces enforce the restricted Pod Security level"
show_and_apply "$OPERATOR_NS" <<YAML
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: infinispan-operator
spec:
  targetNamespaces: [$NS]
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: $PACKAGE
spec:
  channel: alpha
  name: $PACKAGE
  source: $CATALOG
  sourceNamespace: $OLM_NS
YAML
started=$SECONDS
csv_succeeded() {
  [[ $(kubectl get -n "$OPERATOR_NS" csv infinispan-operator.v0.1.0 -o jsonpath='{.status.phase}') == Succeeded ]]
}
wait_for "OLM resolved the Subscription, unpacked the bundle and installed the CSV: Succeeded" 300 csv_succeeded
wait_for "the cluster operator's Deployment is Available" 120 \
  kubectl wait -n "$OPERATOR_NS" --for=condition=Available deployment/infinispan-cluster-operator --timeout=5s
note "from the Subscription to the operator Available: $((SECONDS - started)) s"
kubectl get -n "$OPERATOR_NS" subscriptions,installplans,csv
kubectl get -n "$OPERATOR_NS" pods -o wide

say "An Infinispan CR in $NS: one server"
show_and_apply "$NS" <<YAML
apiVersion: infinispan.org/v1
kind: Infinispan
metadata:
  name: $CLUSTER
spec:
  replicas: 1
  version: "$SERVER_VERSION"
  container:
    resources:
      requests: {cpu: 200m, memory: 1Gi}
      limits: {memory: 1Gi}
YAML
wait_for "the cluster's server pod is Ready" 240 \
  kubectl wait -n "$NS" --for=condition=Ready "pod/$CLUSTER-0" --timeout=5s
wait_for "the Infinispan CR is Ready" 120 kubectl wait -n "$NS" --for=condition=Ready "infinispan/$CLUSTER" --timeout=5s
wait_for "the resources operator's pod is Ready" 120 \
  kubectl wait -n "$NS" --for=condition=Available "deployment/resources-operator-$CLUSTER" --timeout=5s
kubectl get -n "$NS" infinispan "$CLUSTER"
kubectl get pods -n "$NS" -o wide

say "A Cache CR, created on the server by the cluster's resources operator"
show_and_apply "$NS" <<YAML
apiVersion: infinispan.org/v2alpha1
kind: Cache
metadata:
  name: orders
  labels:
    infinispan.org/cluster: $CLUSTER
spec:
  template: |
    distributedCache:
      mode: SYNC
YAML
wait_for "Cache orders is Ready" 90 kubectl wait -n "$NS" --for=condition=Ready --timeout=5s cache/orders

if [[ $MODE == ci ]]; then
  say "CI mode: every check passed; removing what the demo made"
  exit 0   # the EXIT trap runs `down`
fi

cat <<EOF

Everything is still running, as pods on the testbed's node:
  OLM                    kubectl -n $OLM_NS get pods
  the operator (by OLM)  kubectl -n $OPERATOR_NS get subscriptions,installplans,csv,pods
  the cluster            kubectl -n $NS get infinispan,caches,pods

Try:
  source $RUN_DIR/env
  kubectl -n $OPERATOR_NS get csv infinispan-operator.v0.1.0 -o yaml   # what OLM installed, and how
  kubectl -n $OPERATOR_NS delete subscription $PACKAGE && kubectl -n $OPERATOR_NS delete csv infinispan-operator.v0.1.0
                                          # uninstalled: the cluster keeps running; re-apply the Subscription to adopt it

Remove the demo with:  make demo-olm-down    (the testbed keeps running; 'make testbed-down' stops it)
EOF
