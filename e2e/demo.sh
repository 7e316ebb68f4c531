#!/usr/bin/env bash
# `make demo`: the operators doing their main job on this machine, as users run them: every part
# a pod on the testbed's node, from images built here (`make images`), nothing standing in.
#
#   e2e/demo.sh          run the demo and leave everything running (what `make demo` does)
#   e2e/demo.sh --ci     the same, non-interactive, every check fatal, and everything the demo
#                        started removed at the end (also DEMO_CI=1); `make test` runs this
#   e2e/demo.sh down     remove what the demo made (what `make demo-down` does)
#
# What it does, in order (`make demo` runs `make testbed-up images` first):
#  1. installs the Helm chart with its Deployment (`operator.enabled=true`) into the namespace
#     `infinispan-operator`, watching the namespace `demo`, the images set to the local registry's;
#  2. applies an `Infinispan` CR with two replicas: the cluster operator's pod creates the
#     cluster's StatefulSet, Services, Secrets and the resources operator's Deployment; two server
#     pods form one cluster (DNS_PING through CoreDNS), the resources operator's pod starts;
#  3. shows the sync both ways for caches, templates, schemas, counters and tasks, with kubectl
#     and with REST through the cluster's Service.
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
SERVER_VERSION=16.0.7

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
# On failure: what a user would look at (pods, the operators' logs, the CR's conditions, Events).
fail() {
  printf '\n%sFAILED: %s%s\n' "$RED" "$*" "$PLAIN" >&2
  {
    kubectl get pods -n "$OPERATOR_NS" -o wide
    kubectl get pods -n "$NS" -o wide
    kubectl get -n "$NS" infinispan "$CLUSTER" -o jsonpath='{range .status.conditions[*]}{.type}={.status} ({.reason}) {.message}{"\n"}{end}'
    printf -- '--- cluster operator log\n'
    kubectl logs -n "$OPERATOR_NS" -l app.kubernetes.io/component=cluster-operator --tail=20
    printf -- '--- resources operator log\n'
    kubectl logs -n "$NS" "deployment/resources-operator-$CLUSTER" --tail=20
    printf -- '--- events in %s\n' "$NS"
    kubectl get events -n "$NS" --sort-by=.lastTimestamp | tail -15
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

# shellcheck disable=SC1091
[[ -f $RUN_DIR/env ]] || { echo "no testbed environment at $RUN_DIR/env: run 'make testbed-up' (or 'make demo')" >&2; exit 1; }
source "$RUN_DIR/env"
[[ ${TESTBED_NODE:-0} == 1 ]] || { echo "the testbed in $RUN_DIR has no node (TESTBED_NODE=0): the demo runs pods; start it with 'make testbed-up'" >&2; exit 1; }
[[ -f $RUN_DIR/images.env ]] || { echo "no images built for this testbed: run 'make images' (or 'make demo')" >&2; exit 1; }
# shellcheck disable=SC1091
source "$RUN_DIR/images.env"
for tool in kubectl helm jq curl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: 'make testbed-up' links kubectl and helm into $RUN_DIR/bin; jq and curl come from the OS" >&2; exit 1; }
done

# Everything the demo made, in the order that loses nothing: the Infinispan CR is deleted while
# both operators still run, so the resources operator releases its finalizers and the cluster
# operator drains and removes the cluster's objects, volumes included (design E5); then the
# namespace, the Helm release and its namespace.
down() {
  say "Removing the demo"
  if kubectl get -n "$NS" infinispan "$CLUSTER" >/dev/null 2>&1; then
    kubectl delete -n "$NS" infinispan "$CLUSTER" --wait=true --timeout=180s \
      || note "the Infinispan CR was not deleted in 180 s; its finalizers are removed below"
  fi
  if kubectl get namespace "$NS" >/dev/null 2>&1; then
    # Without their operators, finalizers would keep these objects (and the namespace) forever.
    local kind object
    for kind in infinispans caches templates schemas counters tasks backups restores; do
      for object in $(kubectl get -n "$NS" "$kind.infinispan.org" -o name 2>/dev/null); do
        kubectl patch -n "$NS" "$object" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
      done
    done
    kubectl delete namespace "$NS" --wait=true --timeout=180s >/dev/null && note "deleted namespace $NS"
  fi
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
if [[ -d $DEMO_DIR ]] || kubectl get namespace "$NS" >/dev/null 2>&1 || kubectl get namespace "$OPERATOR_NS" >/dev/null 2>&1; then
  down
fi
mkdir -p "$DEMO_DIR"
chmod 700 "$DEMO_DIR"
if [[ $MODE == ci ]]; then
  trap 'rc=$?; down || true; exit $rc' EXIT
fi

# The repository and the tag of an image reference REGISTRY/PATH:TAG.
repository() { echo "${1%:*}"; }
tag() { echo "${1##*:}"; }

say "Installing the Helm chart helm/infinispan-operator into namespace $OPERATOR_NS, watching namespace $NS"
note "the images were built on this machine and pushed to the testbed's registry:"
note "  $TESTBED_CLUSTER_OPERATOR_IMAGE"
note "  $TESTBED_RESOURCES_OPERATOR_IMAGE"
note "  $TESTBED_SERVER_IMAGE (Infinispan $SERVER_VERSION)"
for namespace in "$NS" "$OPERATOR_NS"; do
  kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl label namespace "$namespace" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
done
note "both namespaces enforce the restricted Pod Security level"
cat >"$DEMO_DIR/values.yaml" <<YAML
watch: {scope: list, namespaces: [$NS]}
image: {repository: "$(repository "$TESTBED_CLUSTER_OPERATOR_IMAGE")", tag: "$(tag "$TESTBED_CLUSTER_OPERATOR_IMAGE")"}
resourcesOperator:
  image: {repository: "$(repository "$TESTBED_RESOURCES_OPERATOR_IMAGE")", tag: "$(tag "$TESTBED_RESOURCES_OPERATOR_IMAGE")"}
server:
  images: {"$SERVER_VERSION": "$TESTBED_SERVER_IMAGE"}
YAML
sed 's/^/    | /' "$DEMO_DIR/values.yaml"
helm upgrade --install "$RELEASE" helm/infinispan-operator --namespace "$OPERATOR_NS" \
  --values "$DEMO_DIR/values.yaml" --wait --timeout 3m >/dev/null || fail "helm install"
wait_for "the cluster operator's pod is Ready" 120 \
  kubectl wait -n "$OPERATOR_NS" --for=condition=Ready pod -l app.kubernetes.io/component=cluster-operator --timeout=5s
kubectl get pods -n "$OPERATOR_NS" -o wide

say "An Infinispan CR: a cluster of two servers named $CLUSTER"
note "small CPU requests, so that the demo fits on a 2-core machine; SERVER_LIBS adds a JavaScript engine for"
note "server tasks (Java 17 has none): the image's launch.sh installs the artifacts into the server's lib/"
note "(the official image downloads them from Maven Central; the testbed's image carries them)"
show_and_apply <<YAML
apiVersion: infinispan.org/v1
kind: Infinispan
metadata:
  name: $CLUSTER
spec:
  replicas: 2
  version: "$SERVER_VERSION"
  container:
    resources:
      requests: {cpu: 200m, memory: 1Gi}
      limits: {memory: 1Gi}
    env:
    - name: SERVER_LIBS
      value: >-
        org.openjdk.nashorn:nashorn-core:15.6 org.ow2.asm:asm:7.3.1 org.ow2.asm:asm-commons:7.3.1
        org.ow2.asm:asm-tree:7.3.1 org.ow2.asm:asm-util:7.3.1 org.ow2.asm:asm-analysis:7.3.1
YAML
wait_for "the cluster's two server pods are Ready" 240 \
  kubectl wait -n "$NS" --for=condition=Ready "pod/$CLUSTER-0" "pod/$CLUSTER-1" --timeout=5s
wait_for "the Infinispan CR is Ready" 120 kubectl wait -n "$NS" --for=condition=Ready "infinispan/$CLUSTER" --timeout=5s
wait_for "the resources operator's pod is Ready" 120 \
  kubectl wait -n "$NS" --for=condition=Available "deployment/resources-operator-$CLUSTER" --timeout=5s
kubectl get -n "$NS" infinispan "$CLUSTER"
kubectl get pods -n "$NS" -o wide
note "what the cluster operator created for it:"
kubectl get -n "$NS" statefulsets,services,secrets,deployments,persistentvolumeclaims -l "app.kubernetes.io/instance=$CLUSTER"

say "REST over TLS through the cluster's Service, as the application user of Secret $CLUSTER-generated-identities"
# TLS by default: the operator issued the server's certificate from the cluster's own CA, which
# it publishes in the ConfigMap <cluster>-ca.crt; the certificate names the Service.
SERVICE_IP=$(kubectl get -n "$NS" service "$CLUSTER" -o jsonpath='{.spec.clusterIP}')
SERVICE_HOST=$CLUSTER.$NS.svc.cluster.local
kubectl get -n "$NS" configmap "$CLUSTER-ca.crt" -o jsonpath='{.data.ca\.crt}' >"$DEMO_DIR/ca.crt"
[[ -s $DEMO_DIR/ca.crt ]] || fail "the ConfigMap $CLUSTER-ca.crt holds no CA"
note "the cluster's CA, from ConfigMap $NS/$CLUSTER-ca.crt: $(openssl x509 -in "$DEMO_DIR/ca.crt" -noout -subject)"
SERVER_URL=https://$SERVICE_HOST:11222
secret_key() { kubectl get -n "$NS" secret "$1" -o json | jq -r --arg k "$2" '.data[$k] | @base64d'; }
IDENTITIES=$(secret_key "$CLUSTER-generated-identities" identities.yaml)
# The generated file's format: "credentials:\n- username: developer\n  password: <alphanumeric>\n...".
DEV_USER=$(sed -n 's/^- username: *//p' <<<"$IDENTITIES" | head -1)
DEV_PASSWORD=$(sed -n 's/^  password: *//p' <<<"$IDENTITIES" | head -1)
[[ -n $DEV_USER && -n $DEV_PASSWORD ]] || fail "Secret $CLUSTER-generated-identities holds no user"
# Over TLS the server offers BASIC; the host name resolves to the Service's IP from here.
printf 'user = "%s:%s"\ncacert = "%s"\nresolve = "%s:11222:%s"\n' "$DEV_USER" "$DEV_PASSWORD" \
  "$DEMO_DIR/ca.crt" "$SERVICE_HOST" "$SERVICE_IP" >"$DEMO_DIR/curl-credentials"
chmod 600 "$DEMO_DIR/curl-credentials"
ispn() { curl -s -K "$DEMO_DIR/curl-credentials" "$@"; }
wait_for "the server accepts '$DEV_USER' at $SERVER_URL (Service $NS/$CLUSTER)" 60 \
  curl -sf -K "$DEMO_DIR/curl-credentials" "$SERVER_URL/rest/v2/caches"
MEMBERS=$(ispn "$SERVER_URL/rest/v2/container" | jq -c '.cluster_members | sort')
note "the cluster's members, as the server reports them: $MEMBERS"
[[ $MEMBERS == "[\"$CLUSTER-0\",\"$CLUSTER-1\"]" ]] || fail "the two server pods did not form one cluster: $MEMBERS"
ok "the two server pods form one cluster"

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

if [[ $MODE == ci ]]; then
  say "CI mode: every check passed; removing what the demo started"
  exit 0   # the EXIT trap runs `down`
fi

cat <<EOF

Everything is still running, as pods on the testbed's node:
  the cluster operator    kubectl -n $OPERATOR_NS logs deployment/$RELEASE
  the resources operator  kubectl -n $NS logs deployment/resources-operator-$CLUSTER
  the servers             kubectl -n $NS get pods; REST at $SERVER_URL through the Service $NS/$CLUSTER
                          (user $DEV_USER, password in Secret $NS/$CLUSTER-generated-identities)

Try:
  source $RUN_DIR/env
  kubectl get infinispan-all -n $NS            # every kind of the project (category 'infinispan-all')
  kubectl explain cache.spec
  curl -K $DEMO_DIR/curl-credentials $SERVER_URL/rest/v2/caches
  kubectl apply -n $NS -f <a Cache CR labelled infinispan.org/cluster: $CLUSTER>
  kubectl delete -n $NS pod $CLUSTER-1         # the StatefulSet brings it back on its volume
  kubectl delete -n $NS infinispan $CLUSTER    # drains: the resources operator lets go, then everything is collected

Remove the demo with:  make demo-down    (the testbed keeps running; 'make testbed-down' stops it)
EOF
