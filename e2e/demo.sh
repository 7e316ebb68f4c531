#!/usr/bin/env bash
# `make demo`: the operators doing their main job on this machine, with real parts only.
#
#   e2e/demo.sh          run the demo and leave everything running (what `make demo` does)
#   e2e/demo.sh --ci     the same, non-interactive, every check fatal, and everything the demo
#                        started removed at the end (also DEMO_CI=1); `make test` runs this
#   e2e/demo.sh down     stop what the demo started (what `make demo-down` does)
#
# What it does, in order (the testbed is already up: `make demo` runs `make testbed-up` first):
#  1. installs the Helm chart (CRDs, the cluster operator's ServiceAccount and RBAC for the
#     namespace `demo`, the label policy) with `operator.enabled=false`: no kubelet runs pods
#     here, so the cluster operator runs out of cluster, as the chart's ServiceAccount;
#  2. starts the cluster operator and applies an `Infinispan` CR; the operator creates the
#     cluster's objects (StatefulSet, Services, Secrets, the resources operator's Deployment...);
#  3. starts what those pods would run: a real Infinispan server with the realm the cluster
#     operator generated, and the resources operator with the args/env of its Deployment, as
#     its ServiceAccount (only the server URL and the metrics port differ);
#  4. shows the sync both ways for caches, templates, schemas, counters and tasks.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=show
case ${1:-} in
  "") ;;
  --ci) MODE=ci ;;
  down) MODE=down ;;
  *) echo "usage: e2e/demo.sh [--ci|down]" >&2; exit 2 ;;
esac
[[ ${DEMO_CI:-} == 1 && $MODE == show ]] && MODE=ci

RUN_DIR=${TESTBED_RUN_DIR:-$PWD/target/testbed}
DEMO_DIR=$RUN_DIR/demo
NS=demo                          # the namespace of the Infinispan CR
CLUSTER=demo                     # the Infinispan CR's name
OPERATOR_NS=infinispan-operator  # where the Helm release lives
RELEASE=infinispan-operator
NODE=demo                        # the testbed node that stands in for the StatefulSet's pod
NODE_OFFSET=1500                 # its ports: REST/Hot Rod 12722, JGroups 18500 (offsets of other uses: 1000 node0, 1100-1200 README examples, 1300 testbed_lifecycle, 1400-1420 testbed_nodes, 2001+ tests)
SERVER_URL=http://127.0.0.1:$((11222 + NODE_OFFSET))
CO_METRICS=127.0.0.1:${DEMO_CLUSTER_OPERATOR_METRICS_PORT:-29091}
RO_METRICS=127.0.0.1:${DEMO_RESOURCES_OPERATOR_METRICS_PORT:-29092}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}

if [[ -t 1 ]]; then BOLD=$'\033[1m' GREEN=$'\033[32m' RED=$'\033[31m' PLAIN=$'\033[0m'; else BOLD='' GREEN='' RED='' PLAIN=''; fi
# show_and_apply: print the YAML on stdin, then apply it in the demo namespace. (Not `tee
# /dev/stderr`: reopening stderr truncates it when it is a file, e.g. the CI log.)
show_and_apply() {
  local yaml
  yaml=$(cat)
  printf '%s\n' "$yaml" | sed 's/^/    | /'
  kubectl apply -n "$NS" -f - <<<"$yaml"
}
say() { printf '\n%s==> %s%s\n' "$BOLD" "$*" "$PLAIN"; }
note() { printf '    %s\n' "$*"; }
ok() { printf '    %sok%s %s\n' "$GREEN" "$PLAIN" "$*"; }
fail() {
  printf '\n%sFAILED: %s%s\n' "$RED" "$*" "$PLAIN" >&2
  for log in "$DEMO_DIR"/*.log; do
    [[ -f $log ]] || continue
    printf -- '--- last lines of %s\n' "$log" >&2
    tail -15 "$log" >&2
  done
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

# shellcheck disable=SC1091
[[ -f $RUN_DIR/env ]] || { echo "no testbed environment at $RUN_DIR/env: run 'make testbed-up' (or 'make demo')" >&2; exit 1; }
source "$RUN_DIR/env"
for tool in kubectl helm jq curl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: 'make testbed-up' links kubectl and helm into $RUN_DIR/bin; jq and curl come from the OS" >&2; exit 1; }
done

pidfile() { echo "$DEMO_DIR/$1.pid"; }
running() { [[ -f $(pidfile "$1") ]] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }
stop_process() {
  local name=$1 pid
  running "$name" || { rm -f "$(pidfile "$name")"; return 0; }
  pid=$(cat "$(pidfile "$name")")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$(pidfile "$name")"
  note "stopped the $name (pid $pid)"
}

# Everything the demo started, in the order that loses nothing: the Infinispan CR is deleted
# while both operators still run, so the resources operator releases its finalizers and the
# cluster operator removes the cluster's objects (design E5); then the processes, the node, the
# namespace and the Helm release.
down() {
  say "Stopping the demo"
  if kubectl get namespace "$NS" >/dev/null 2>&1; then
    if kubectl get -n "$NS" infinispan "$CLUSTER" >/dev/null 2>&1; then
      if running cluster-operator; then
        kubectl delete -n "$NS" infinispan "$CLUSTER" --wait=true --timeout=120s \
          || note "the Infinispan CR was not deleted in 120 s; its finalizers are removed below"
      fi
    fi
  fi
  stop_process resources-operator
  stop_process cluster-operator
  if kubectl get namespace "$NS" >/dev/null 2>&1; then
    # Without their operators, finalizers would keep these objects (and the namespace) forever.
    local kind object
    for kind in infinispans caches templates schemas counters tasks backups restores; do
      for object in $(kubectl get -n "$NS" "$kind.infinispan.org" -o name 2>/dev/null); do
        kubectl patch -n "$NS" "$object" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
      done
    done
    kubectl delete namespace "$NS" --wait=true --timeout=120s >/dev/null && note "deleted namespace $NS"
  fi
  e2e/testbed/infinispan.sh stop "$NODE" --wipe >/dev/null 2>&1 && note "stopped and wiped the server node $NODE" || true
  if helm status -n "$OPERATOR_NS" "$RELEASE" >/dev/null 2>&1; then
    helm uninstall -n "$OPERATOR_NS" "$RELEASE" --wait >/dev/null && note "uninstalled the Helm release $RELEASE (the CRDs stay, as Helm keeps crds/)"
  fi
  kubectl delete namespace "$OPERATOR_NS" --ignore-not-found --wait=true --timeout=120s >/dev/null
  rm -rf "$DEMO_DIR"
  note "the testbed itself keeps running: 'make testbed-down' stops it"
}

if [[ $MODE == down ]]; then
  down
  exit 0
fi

# A re-run starts clean.
if [[ -d $DEMO_DIR ]] || kubectl get namespace "$NS" >/dev/null 2>&1; then
  down
fi
mkdir -p "$DEMO_DIR"
chmod 700 "$DEMO_DIR"
if [[ $MODE == ci ]]; then
  trap 'rc=$?; down || true; exit $rc' EXIT
fi

# DEMO_PROFILE=release runs the release binaries the images carry (`make test` does); the
# default debug build is quicker to build the first time.
PROFILE=${DEMO_PROFILE:-debug}
case $PROFILE in
  debug) BUILD_FLAGS=() ;;
  release) BUILD_FLAGS=(--release --locked) ;;
  *) echo "DEMO_PROFILE must be debug or release, not '$PROFILE'" >&2; exit 2 ;;
esac
say "Building the two operators ($PROFILE; the first build compiles ~400 crates: 5-10 minutes on 2 cores; cargo shows its progress)"
"${CARGO:-cargo}" build "${BUILD_FLAGS[@]}" -p cluster-operator -p resources-operator
CLUSTER_OPERATOR_BIN=$TARGET/$PROFILE/cluster-operator
RESOURCES_OPERATOR_BIN=$TARGET/$PROFILE/resources-operator

say "Installing the Helm chart helm/infinispan-operator into namespace $OPERATOR_NS, watching namespace $NS"
note "operator.enabled=false: the chart installs the CRDs, the label policy, the operator's ServiceAccount and"
note "its RBAC, but no Deployment (no kubelet runs pods here); the operator runs below as that ServiceAccount."
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
helm upgrade --install "$RELEASE" helm/infinispan-operator --namespace "$OPERATOR_NS" --create-namespace \
  --set operator.enabled=false --set watch.scope=list --set "watch.namespaces={$NS}"
SERVICE_ACCOUNT=$(kubectl get serviceaccount -n "$OPERATOR_NS" -l "app.kubernetes.io/instance=$RELEASE" -o jsonpath='{.items[0].metadata.name}')
[[ -n $SERVICE_ACCOUNT ]] || fail "the chart created no ServiceAccount in $OPERATOR_NS"
wait_for "the eight CRDs of infinispan.org are established" 60 \
  kubectl wait --for condition=Established --timeout=5s crd/infinispans.infinispan.org crd/caches.infinispan.org \
  crd/templates.infinispan.org crd/schemas.infinispan.org crd/counters.infinispan.org crd/tasks.infinispan.org \
  crd/backups.infinispan.org crd/restores.infinispan.org

# kubeconfig_for NAMESPACE SERVICEACCOUNT FILE: a kubeconfig with a short-lived token of the account.
kubeconfig_for() {
  local namespace=$1 account=$2 file=$3 server ca token
  server=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
  ca=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  token=$(kubectl create token -n "$namespace" "$account" --duration=24h)
  (umask 077; cat >"$file" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster: {server: "$server", certificate-authority-data: "$ca"}
users:
- name: $account
  user: {token: "$token"}
contexts:
- name: $account
  context: {cluster: testbed, user: $account, namespace: $namespace}
current-context: $account
KUBECONFIG
  )
}

kubeconfig_for "$OPERATOR_NS" "$SERVICE_ACCOUNT" "$DEMO_DIR/cluster-operator.kubeconfig"
note "the cluster operator's identity: $(KUBECONFIG=$DEMO_DIR/cluster-operator.kubeconfig kubectl auth whoami -o jsonpath='{.status.userInfo.username}')"
if KUBECONFIG=$DEMO_DIR/cluster-operator.kubeconfig kubectl auth can-i list secrets -n kube-system >/dev/null 2>&1; then
  fail "the chart's ServiceAccount may read Secrets in kube-system: its RBAC is not least-privilege"
fi
ok "it may not read Secrets outside the watched namespace (least privilege)"

say "Starting the cluster operator out of cluster, as $OPERATOR_NS/$SERVICE_ACCOUNT (log: $DEMO_DIR/cluster-operator.log)"
note "--server-url tells it where the cluster's server answers from this machine (Backup/Restore use it;"
note "in a cluster it uses the Service name); --label-policy=external: the chart installed the label policy."
setsid env KUBECONFIG="$DEMO_DIR/cluster-operator.kubeconfig" "$CLUSTER_OPERATOR_BIN" run \
  --watch-namespaces="$NS" --server-url="$NS/$CLUSTER=$SERVER_URL" --metrics-address="$CO_METRICS" \
  --leader-election=true --lease-namespace="$OPERATOR_NS" --identity=demo-cluster-operator --label-policy=external \
  >>"$DEMO_DIR/cluster-operator.log" 2>&1 </dev/null &
echo $! >"$(pidfile cluster-operator)"
wait_for "the cluster operator is ready (http://$CO_METRICS/readyz)" 60 curl -sf "http://$CO_METRICS/readyz"

say "An Infinispan CR: a one-node cluster named $CLUSTER"
show_and_apply <<YAML
apiVersion: infinispan.org/v1
kind: Infinispan
metadata:
  name: $CLUSTER
spec:
  replicas: 1
YAML
wait_for "the cluster operator wrote the CR's status" 60 \
  bash -c "[[ -n \$(kubectl get -n $NS infinispan $CLUSTER -o jsonpath='{.status.operatorCredentialsSecret}') ]]"
wait_for "the resources operator's Deployment exists" 60 kubectl get -n "$NS" deployment "resources-operator-$CLUSTER"
kubectl get -n "$NS" infinispan "$CLUSTER"
note "what the cluster operator created for it:"
kubectl get -n "$NS" statefulsets,services,configmaps,secrets,deployments,serviceaccounts,roles,rolebindings,poddisruptionbudgets \
  -l "app.kubernetes.io/instance=$CLUSTER" 2>/dev/null || kubectl get -n "$NS" statefulsets,services,secrets,deployments
note "Its pods stay Pending: no kubelet runs containers on this machine. The demo now starts what they would run."

say "A real Infinispan server for the StatefulSet, with the realm the cluster operator generated (Secret $CLUSTER-server-identities)"
e2e/testbed/infinispan.sh start "$NODE" --offset "$NODE_OFFSET" --cluster "$CLUSTER" \
  --jgroups-port $((17000 + NODE_OFFSET)) --peers "127.0.0.1[$((17000 + NODE_OFFSET))]"
NODE_CONF=$RUN_DIR/infinispan/$NODE/conf
secret_key() { kubectl get -n "$NS" secret "$1" -o json | jq -r --arg k "$2" '.data[$k] | @base64d'; }
(umask 077
 secret_key "$CLUSTER-server-identities" users.properties >"$NODE_CONF/users.properties"
 secret_key "$CLUSTER-server-identities" groups.properties >"$NODE_CONF/groups.properties")
IDENTITIES=$(secret_key "$CLUSTER-generated-identities" identities.yaml)
# The generated file's format: "credentials:\n- username: developer\n  password: <alphanumeric>\n...".
DEV_USER=$(sed -n 's/^- username: *//p' <<<"$IDENTITIES" | head -1)
DEV_PASSWORD=$(sed -n 's/^  password: *//p' <<<"$IDENTITIES" | head -1)
[[ -n $DEV_USER && -n $DEV_PASSWORD ]] || fail "Secret $CLUSTER-generated-identities holds no user"
printf 'user = "%s:%s"\n' "$DEV_USER" "$DEV_PASSWORD" >"$DEMO_DIR/curl-credentials"
chmod 600 "$DEMO_DIR/curl-credentials"
ispn() { curl -s -K "$DEMO_DIR/curl-credentials" "$@"; }
wait_for "the server accepts the application user '$DEV_USER' of Secret $CLUSTER-generated-identities" 90 \
  curl -sf -K "$DEMO_DIR/curl-credentials" "$SERVER_URL/rest/v2/caches"

say "The resources operator, started the way its Deployment says (args and env read back from the API)"
DEPLOYMENT=$(kubectl get -n "$NS" deployment "resources-operator-$CLUSTER" -o json)
RO_ACCOUNT=$(jq -r '.spec.template.spec.serviceAccountName' <<<"$DEPLOYMENT")
mapfile -t RO_ARGS < <(jq -r '.spec.template.spec.containers[0].args[]' <<<"$DEPLOYMENT" \
  | sed -e "s#^--infinispan-url=.*#--infinispan-url=$SERVER_URL#" -e "s#^--metrics-address=.*#--metrics-address=$RO_METRICS#")
mapfile -t RO_ENV < <(jq -r '.spec.template.spec.containers[0].env[]? | select(.value != null) | "\(.name)=\(.value)"' <<<"$DEPLOYMENT")
note "args: ${RO_ARGS[*]}"
note "(the Service URL and the metrics port are replaced by $SERVER_URL and $RO_METRICS)"
kubeconfig_for "$NS" "$RO_ACCOUNT" "$DEMO_DIR/resources-operator.kubeconfig"
setsid env "${RO_ENV[@]}" POD_NAME="resources-operator-$CLUSTER-demo" KUBECONFIG="$DEMO_DIR/resources-operator.kubeconfig" \
  "$RESOURCES_OPERATOR_BIN" "${RO_ARGS[@]}" >>"$DEMO_DIR/resources-operator.log" 2>&1 </dev/null &
echo $! >"$(pidfile resources-operator)"
wait_for "the resources operator is ready (http://$RO_METRICS/readyz), as ServiceAccount $NS/$RO_ACCOUNT" 90 \
  curl -sf "http://$RO_METRICS/readyz"

# has_cr KIND SERVER-NAME: a CR of KIND whose server name (spec.name, else metadata.name) is SERVER-NAME.
has_cr() {
  kubectl get -n "$NS" "$1" -o json | jq -e --arg n "$2" '[.items[] | (.spec.name // .metadata.name)] | index($n) != null'
}
no_cr() { ! has_cr "$@"; }
on_server() { ispn "$SERVER_URL/rest/v2/$1" | jq -e --arg n "$2" 'index($n) != null'; }
not_on_server() { ! on_server "$@"; }

say "Kubernetes -> server: a Cache CR applied with kubectl"
show_and_apply <<YAML
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
      statistics: true
YAML
wait_for "Cache orders is Ready" 60 kubectl wait -n "$NS" --for=condition=Ready --timeout=5s cache/orders
wait_for "the cache 'orders' is on the server" 30 on_server caches orders
note "caches on the server (the server's and the operator's internal ___ caches left out): $(ispn "$SERVER_URL/rest/v2/caches" | jq -c '[.[] | select(startswith("___") | not)]')"

say "Server -> Kubernetes: a cache created over REST by another client, named 'Invoices/EU'"
ispn -X POST -H 'Content-Type: application/json' -d '{"local-cache":{"statistics":true}}' \
  "$SERVER_URL/rest/v2/caches/Invoices%2FEU" -o /dev/null -w "    REST create: HTTP %{http_code}\n"
wait_for "a Cache CR for 'Invoices/EU' appeared" 30 has_cr caches Invoices/EU
kubectl get -n "$NS" caches -o custom-columns='NAME:.metadata.name,SERVER-NAME:.spec.name,ORIGIN:.metadata.labels.infinispan\.org/origin,READY:.status.conditions[?(@.type=="Ready")].status'

say "Deleting on each side: the CR 'orders' with kubectl, the cache 'Invoices/EU' over REST"
kubectl delete -n "$NS" cache/orders --wait=true
wait_for "the cache 'orders' is gone from the server" 30 not_on_server caches orders
ispn -X DELETE "$SERVER_URL/rest/v2/caches/Invoices%2FEU" -o /dev/null -w "    REST delete: HTTP %{http_code}\n"
wait_for "the Cache CR of 'Invoices/EU' is gone" 30 no_cr caches Invoices/EU

say "The other kinds: a Template (and a Cache using it), a Schema, a Counter and a Task applied with kubectl"
show_and_apply <<YAML
apiVersion: infinispan.org/v2alpha1
kind: Template
metadata:
  name: replicated-small
  labels: { infinispan.org/cluster: $CLUSTER }
spec:
  template: |
    replicatedCache:
      mode: SYNC
      statistics: true
---
apiVersion: infinispan.org/v2alpha1
kind: Cache
metadata:
  name: sessions
  labels: { infinispan.org/cluster: $CLUSTER }
spec:
  templateName: replicated-small
---
apiVersion: infinispan.org/v2alpha1
kind: Schema
metadata:
  name: books
  labels: { infinispan.org/cluster: $CLUSTER }
spec:
  schema: |
    package library;
    message Book { optional string title = 1; }
---
apiVersion: infinispan.org/v2alpha1
kind: Counter
metadata:
  name: visits
  labels: { infinispan.org/cluster: $CLUSTER }
spec:
  type: strong
  initialValue: 0
  upperBound: 1000000
---
apiVersion: infinispan.org/v2alpha1
kind: Task
metadata:
  name: hello
  labels: { infinispan.org/cluster: $CLUSTER }
spec:
  script: |
    // mode=local,language=javascript
    "hello from a Task CR"
YAML
wait_for "Template, Cache, Schema, Counter and Task are Ready" 90 kubectl wait -n "$NS" --for=condition=Ready --timeout=5s \
  template/replicated-small cache/sessions schema/books counter/visits task/hello
wait_for "the cache 'sessions' is on the server" 30 on_server caches sessions
wait_for "the schema 'books.proto' is on the server" 30 bash -c \
  "curl -s -K '$DEMO_DIR/curl-credentials' '$SERVER_URL/rest/v2/schemas' | jq -e '[.[].name] | index(\"books.proto\") != null'"
wait_for "the counter 'visits' is on the server" 30 on_server counters visits
HELLO=$(ispn -X POST "$SERVER_URL/rest/v2/tasks/hello?action=exec")
[[ $HELLO == *"hello from a Task CR"* ]] || fail "the task 'hello' did not run on the server: $HELLO"
ok "the task 'hello' runs on the server: $HELLO"

say "A counter created over REST appears as a Counter CR (the server sends no counter events: counters are listed every 10 s)"
ispn -X POST -H 'Content-Type: application/json' -d '{"weak-counter":{"initial-value":5}}' \
  "$SERVER_URL/rest/v2/counters/downloads" -o /dev/null -w "    REST create: HTTP %{http_code}\n"
wait_for "a Counter CR for 'downloads' appeared" 40 has_cr counters downloads
kubectl get -n "$NS" templates,schemas,counters,tasks

say "The API server refuses an invalid Counter (bounds out of order) with a clear message"
if cat <<YAML | kubectl apply -n "$NS" -f - 2>"$DEMO_DIR/refused.txt"; then
apiVersion: infinispan.org/v2alpha1
kind: Counter
metadata:
  name: broken
  labels: { infinispan.org/cluster: $CLUSTER }
spec:
  lowerBound: 10
  upperBound: 5
YAML
  fail "the API server accepted a Counter whose lowerBound is above its upperBound"
fi
note "$(cat "$DEMO_DIR/refused.txt")"
ok "refused"

say "The cluster as its CR tells it"
kubectl get -n "$NS" infinispan "$CLUSTER" -o jsonpath='{range .status.conditions[*]}    {.type}={.status} ({.reason}) {.message}{"\n"}{end}'
note "(Ready and ResourcesOperatorReady stay False here: they count the pods' readiness, and no pod runs without a kubelet)"

if [[ $MODE == ci ]]; then
  say "CI mode: every check passed; removing what the demo started"
  exit 0   # the EXIT trap runs `down`
fi

cat <<EOF

Everything is still running:
  the cluster operator   pid $(cat "$(pidfile cluster-operator)"), log $DEMO_DIR/cluster-operator.log, metrics http://$CO_METRICS/metrics
  the resources operator pid $(cat "$(pidfile resources-operator)"), log $DEMO_DIR/resources-operator.log, metrics http://$RO_METRICS/metrics
  the server             $SERVER_URL (user $DEV_USER, password in Secret $NS/$CLUSTER-generated-identities)

Try:
  source $RUN_DIR/env
  kubectl get infinispan-all -n $NS            # every kind of the project (category 'infinispan-all')
  kubectl explain cache.spec
  curl -K $DEMO_DIR/curl-credentials $SERVER_URL/rest/v2/caches
  kubectl apply -n $NS -f <a Cache CR labelled infinispan.org/cluster: $CLUSTER>
  kubectl delete -n $NS infinispan $CLUSTER    # drains: the resources operator lets go, then everything is collected

Stop the demo with:    make demo-down    (the testbed keeps running; 'make testbed-down' stops it)
EOF
