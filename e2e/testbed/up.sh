#!/usr/bin/env bash
# Starts the testbed on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager, the node (kubelet,
# containerd, kube-proxy, kube-scheduler, CoreDNS, a registry: node.sh; TESTBED_NODE=0 leaves it
# out), OLM on the node (olm.sh; TESTBED_OLM=0 leaves it out) and one Infinispan server process
# (node0), waits until each is ready, and writes $RUN_DIR/env (`source` it). Builds what is
# missing first (see build.sh). Idempotent: what is already running and healthy is left alone.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTBED_DIR/pki.sh"

"$TESTBED_DIR/build.sh" all

K8S_BIN=$(k8s_bin_dir)
ETCD_BIN=$(etcd_bin_dir)
PKI=$RUN_DIR/pki
mkdir -p "$RUN_DIR/logs" "$RUN_DIR/pids" "$RUN_DIR/bin"
API_URL="https://127.0.0.1:$APISERVER_PORT"

# The testbed's own kubectl first on PATH (Debian's is far outside the version-skew policy).
ln -sf "$K8S_BIN/kubectl" "$RUN_DIR/bin/kubectl"
# The packaging tools (helm, operator-sdk, opm, hadolint) beside it, for the chart/bundle tests and the demo.
ln -sf "$(helm_bin)" "$RUN_DIR/bin/helm"
ln -sf "$(operator_sdk_bin)" "$RUN_DIR/bin/operator-sdk"
ln -sf "$(opm_bin)" "$RUN_DIR/bin/opm"
ln -sf "$(hadolint_bin)" "$RUN_DIR/bin/hadolint"

if ((TESTBED_NODE)); then
  # The bridge and the firewall first: with the node, the API server listens on every address
  # (pods reach it at the node's), and the firewall lets only loopback and the bridge in.
  "$TESTBED_DIR/node.sh" network
  APISERVER_BIND=0.0.0.0
else
  APISERVER_BIND=127.0.0.1
fi

pki_init "$PKI"
issue_client_cert "$PKI" admin admin system:masters
issue_client_cert "$PKI" apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
issue_client_cert "$PKI" controller-manager system:kube-controller-manager
write_kubeconfig "$RUN_DIR/kubeconfig" "$API_URL" "$PKI" admin
write_kubeconfig "$RUN_DIR/controller-manager.kubeconfig" "$API_URL" "$PKI" controller-manager

# start NAME LOGFILE COMMAND...: runs COMMAND detached in its own session, records its pid.
start() {
  local name=$1; shift
  local pidfile=$RUN_DIR/pids/$name.pid logfile=$RUN_DIR/logs/$name.log
  setsid "$@" >>"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
}

need_port() {
  local port=$1 what=$2 var=$3
  if port_in_use "$port"; then
    die "port $port for $what is already in use by another process (set $var to another port)"
  fi
}

# --- etcd
if pid_alive "$RUN_DIR/pids/etcd.pid"; then
  log "etcd already running"
else
  need_port "$ETCD_CLIENT_PORT" etcd ETCD_CLIENT_PORT
  need_port "$ETCD_PEER_PORT" "etcd peer" ETCD_PEER_PORT
  log "starting etcd $("$ETCD_BIN/etcd" --version | sed -n 's/etcd Version: //p') on 127.0.0.1:$ETCD_CLIENT_PORT"
  start etcd "$ETCD_BIN/etcd" --name testbed --data-dir "$RUN_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "testbed=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync \
    --listen-metrics-urls "" --log-level warn
fi
wait_for etcd 30 "$RUN_DIR/logs/etcd.log" "$RUN_DIR/pids/etcd.pid" \
  curl -sf "http://127.0.0.1:$ETCD_CLIENT_PORT/health"

# --- kube-apiserver
apiserver_ready() {
  curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$API_URL/readyz"
}
if pid_alive "$RUN_DIR/pids/kube-apiserver.pid"; then
  log "kube-apiserver already running"
else
  need_port "$APISERVER_PORT" kube-apiserver APISERVER_PORT
  log "starting kube-apiserver $("$K8S_BIN/kubectl" version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)".*/\1/p' | head -1) on $API_URL"
  start kube-apiserver "$K8S_BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --bind-address "$APISERVER_BIND" --advertise-address "$( ((TESTBED_NODE)) && echo "$NODE_IP" || echo 127.0.0.1)" \
    --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --service-account-issuer "https://kubernetes.default.svc.cluster.local" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --authorization-mode Node,RBAC --allow-privileged=true \
    --endpoint-reconciler-type none \
    --enable-admission-plugins OwnerReferencesPermissionEnforcement,NodeRestriction \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --audit-log-path "$RUN_DIR/logs/audit.log" --audit-policy-file "$TESTBED_DIR/audit-policy.yaml" \
    --audit-log-maxsize 200 --audit-log-maxbackup 2
fi
wait_for kube-apiserver 120 "$RUN_DIR/logs/kube-apiserver.log" "$RUN_DIR/pids/kube-apiserver.pid" apiserver_ready

# --- kube-controller-manager (garbage collection, namespaces, Deployments/StatefulSets, SA tokens)
kcm_ready() { curl -skf "https://127.0.0.1:$KCM_PORT/healthz"; }
if pid_alive "$RUN_DIR/pids/kube-controller-manager.pid"; then
  log "kube-controller-manager already running"
else
  need_port "$KCM_PORT" kube-controller-manager KCM_PORT
  log "starting kube-controller-manager"
  start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false
fi
wait_for kube-controller-manager 60 "$RUN_DIR/logs/kube-controller-manager.log" "$RUN_DIR/pids/kube-controller-manager.pid" kcm_ready

# --- the node
if ((TESTBED_NODE)); then
  "$TESTBED_DIR/node.sh" up
fi

# --- OLM on the node, as pods from the image built here (olm.sh; TESTBED_OLM=0 leaves it out)
if ((TESTBED_NODE && TESTBED_OLM)); then
  "$TESTBED_DIR/olm.sh" up
fi

# --- Infinispan node0
"$TESTBED_DIR/infinispan.sh" start node0

# --- the environment file
# shellcheck disable=SC1091
source "$RUN_DIR/infinispan/credentials"
ISPN_VERSION=$(cat "$(infinispan_home)/VERSION")
K8S_VERSION=$(basename "$(dirname "$K8S_BIN")"); K8S_VERSION=${K8S_VERSION#k8s-}
umask 077
cat >"$RUN_DIR/env" <<ENV
# Written by e2e/testbed/up.sh: \`source\` this file to use the testbed.
export TESTBED_RUN_DIR="$RUN_DIR"
export KUBECONFIG="$RUN_DIR/kubeconfig"
export KUBERNETES_VERSION="$K8S_VERSION"
export INFINISPAN_URL="http://127.0.0.1:$((11222 + INFINISPAN_PORT_OFFSET))"
export INFINISPAN_USER="$INFINISPAN_USER"
export INFINISPAN_PASSWORD="$INFINISPAN_PASSWORD"
export INFINISPAN_VERSION="$ISPN_VERSION"
export PATH="$RUN_DIR/bin:\$PATH"
export TESTBED_NODE="$TESTBED_NODE"
ENV
if ((TESTBED_NODE)); then
  cat >>"$RUN_DIR/env" <<ENV
export TESTBED_NODE_NAME="$NODE_NAME"
export TESTBED_REGISTRY="$REGISTRY"
export TESTBED_CLUSTER_DOMAIN="$CLUSTER_DOMAIN"
export TESTBED_POD_CIDR="$POD_CIDR"
export TESTBED_OLM="$TESTBED_OLM"
ENV
fi
log "testbed is up: Kubernetes $K8S_VERSION at $API_URL, Infinispan $ISPN_VERSION at http://127.0.0.1:$((11222 + INFINISPAN_PORT_OFFSET))"
log "use it with: source $RUN_DIR/env"
