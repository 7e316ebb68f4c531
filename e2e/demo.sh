#!/usr/bin/env bash
# `make demo`: brings up the testbed (building it on first use), installs the project's CRDs and
# the cluster-label admission policy on the real API server, and shows what a user can do now.
# The operators themselves join the demo as their issues land.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

RUN_DIR=${TESTBED_RUN_DIR:-target/testbed}
say "The testbed is up (make testbed-up). Loading its environment from $RUN_DIR/env"
# shellcheck disable=SC1091
source "$RUN_DIR/env"

say "Installing the eight CRDs of infinispan.org (generated from the Rust types by 'cluster-operator crd')"
kubectl apply --server-side --force-conflicts --field-manager=infinispan-operators-demo -f helm/infinispan-operator/crds/infinispan.org.yaml
# shellcheck disable=SC2046
kubectl wait --for condition=Established --timeout=60s $(kubectl get crd -o name | grep 'infinispan\.org$')

say "Installing the admission policy that keeps the infinispan.org/cluster label immutable (design N3)"
kubectl apply --server-side --force-conflicts --field-manager=infinispan-operators-demo -f helm/infinispan-operator/files/label-policy.yaml

say "The API as kubectl sees it"
kubectl api-resources --api-group=infinispan.org

say "An Infinispan CR named demo, and the Secret with the operators' server credentials"
kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n demo create secret generic demo-operator-credentials \
  --from-literal=username="$INFINISPAN_USER" --from-literal=password="$INFINISPAN_PASSWORD" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
cat <<'YAML' | kubectl apply -n demo -f -
apiVersion: infinispan.org/v1
kind: Infinispan
metadata:
  name: demo
spec:
  replicas: 1
YAML

say "Building the resources operator (the first build compiles the dependencies: a few minutes)"
cargo build -p resources-operator
OPERATOR_BIN=${CARGO_TARGET_DIR:-target}/debug/resources-operator
METRICS=127.0.0.1:${DEMO_METRICS_PORT:-29090}
PIDFILE=$RUN_DIR/pids/resources-operator-demo.pid
LOG=$RUN_DIR/logs/resources-operator-demo.log
if [[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  kill "$(cat "$PIDFILE")"; sleep 1
fi
say "Starting the resources operator for cluster demo, out of cluster (log: $LOG)"
echo "  (it runs with the testbed's admin kubeconfig for now: its least-privilege Role comes with a later issue)"
setsid "$OPERATOR_BIN" run --cluster demo --namespace demo --infinispan-url "$INFINISPAN_URL" \
  --credentials-secret demo-operator-credentials --metrics-address "$METRICS" >>"$LOG" 2>&1 </dev/null &
echo $! >"$PIDFILE"
for _ in $(seq 1 120); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://$METRICS/readyz") == 200 ]] && break
  sleep 0.5
done
curl -sf "http://$METRICS/readyz" >/dev/null || { echo "the resources operator did not become ready; its log:"; tail -20 "$LOG"; exit 1; }

ispn() { curl -s -u "$INFINISPAN_USER:$INFINISPAN_PASSWORD" "$@"; }

kubectl delete -n demo cache/orders --ignore-not-found --wait=true >/dev/null   # a re-run starts clean
say "Kubernetes -> server: a Cache CR applied with kubectl"
cat <<'YAML' | tee /dev/stderr | kubectl apply -n demo -f -
apiVersion: infinispan.org/v2alpha1
kind: Cache
metadata:
  name: orders
  labels:
    infinispan.org/cluster: demo
spec:
  template: |
    distributedCache:
      mode: SYNC
      statistics: true
YAML
kubectl wait -n demo --for=condition=Ready --timeout=60s cache/orders
echo "caches on the server:"; ispn "$INFINISPAN_URL/rest/v2/caches"; echo

say "Server -> Kubernetes: a cache created over REST by another client, named 'Invoices/EU'"
ispn -X POST -H 'Content-Type: application/json' -d '{"local-cache":{"statistics":true}}' \
  "$INFINISPAN_URL/rest/v2/caches/Invoices%2FEU" -o /dev/null -w "REST create: HTTP %{http_code}\n"
for _ in $(seq 1 40); do
  kubectl get caches -n demo -l infinispan.org/origin=server -o name | grep -q . && break
  sleep 0.25
done
kubectl get caches -n demo

say "Deleting on each side: the CR 'orders' with kubectl, the cache 'Invoices/EU' over REST"
kubectl delete -n demo cache/orders --wait=true
ispn -X DELETE "$INFINISPAN_URL/rest/v2/caches/Invoices%2FEU" -o /dev/null -w "REST delete: HTTP %{http_code}\n"
for _ in $(seq 1 40); do
  kubectl get caches -n demo -o name | grep -q . || break
  sleep 0.25
done
echo "caches on the server:"; ispn "$INFINISPAN_URL/rest/v2/caches"; echo
echo "Cache CRs:"; kubectl get caches -n demo

kubectl delete -n demo schema/books counter/visits task/hello --ignore-not-found --wait=true >/dev/null
say "The other kinds: a Schema, a Counter and a Task applied with kubectl"
cat <<'YAML' | tee /dev/stderr | kubectl apply -n demo -f -
apiVersion: infinispan.org/v2alpha1
kind: Schema
metadata:
  name: books
  labels: { infinispan.org/cluster: demo }
spec:
  schema: |
    package library;
    message Book { optional string title = 1; }
---
apiVersion: infinispan.org/v2alpha1
kind: Counter
metadata:
  name: visits
  labels: { infinispan.org/cluster: demo }
spec:
  type: strong
  initialValue: 0
  upperBound: 1000000
---
apiVersion: infinispan.org/v2alpha1
kind: Task
metadata:
  name: hello
  labels: { infinispan.org/cluster: demo }
spec:
  script: |
    // mode=local,language=javascript
    "hello from a Task CR"
YAML
kubectl wait -n demo --for=condition=Ready --timeout=60s schema/books counter/visits task/hello
echo "on the server: schemas $(ispn "$INFINISPAN_URL/rest/v2/schemas")"
echo "               counters $(ispn "$INFINISPAN_URL/rest/v2/counters")"
echo "               task hello runs: $(ispn -X POST "$INFINISPAN_URL/rest/v2/tasks/hello?action=exec")"

say "A counter created over REST appears as a Counter CR (counters are listed every 10 s)"
ispn -X POST -H 'Content-Type: application/json' -d '{"weak-counter":{"initial-value":5}}' \
  "$INFINISPAN_URL/rest/v2/counters/downloads" -o /dev/null -w "REST create: HTTP %{http_code}\n"
for _ in $(seq 1 60); do
  kubectl get counters -n demo -o jsonpath='{.items[*].spec.name}' | tr ' ' '\n' | grep -qx downloads && break
  sleep 0.5
done
kubectl get counters -n demo -o custom-columns='NAME:.metadata.name,SERVER-NAME:.spec.name,ORIGIN:.metadata.labels.infinispan\.org/origin' \
  | grep -E '^NAME|downloads|visits'
kubectl get schemas,tasks -n demo
ispn -X DELETE "$INFINISPAN_URL/rest/v2/counters/downloads" -o /dev/null

say "The API server refuses an invalid Counter (bounds out of order) with a clear message"
cat <<'YAML' | kubectl apply -n demo -f - || true
apiVersion: infinispan.org/v2alpha1
kind: Counter
metadata:
  name: broken
  labels:
    infinispan.org/cluster: demo
spec:
  lowerBound: 10
  upperBound: 5
YAML

say "The Infinispan server answers at $INFINISPAN_URL (user $INFINISPAN_USER, password in $RUN_DIR/env)"
curl -s -u "$INFINISPAN_USER:$INFINISPAN_PASSWORD" "$INFINISPAN_URL/rest/v2/server"; echo

cat <<EOF2
The resources operator keeps running (pid $(cat "$PIDFILE"), log $LOG).

Everything is still running. Try:
  source $RUN_DIR/env
  kubectl get infinispan-all -A        # every kind of the project (category 'infinispan-all')
  kubectl explain cache.spec
  curl -u "\$INFINISPAN_USER:\$INFINISPAN_PASSWORD" "\$INFINISPAN_URL/rest/v2/caches"
  kubectl apply -n demo -f <your Cache CR, label infinispan.org/cluster: demo>   # synced by the operator
  curl -s http://$METRICS/metrics                                                # its metrics
  kubectl get caches,templates,schemas,counters,tasks -n demo
The cluster operator runs too, but this demo does not use it yet: README "Creating a cluster" shows it (cargo run -p cluster-operator -- run ...).
Stop it with: make testbed-down   (or make testbed-wipe to also delete its state)
EOF2
