#!/usr/bin/env bash
# Shared helpers for the testbed scripts: paths, logging, version lists.
# Sourced, never run directly.

TESTBED_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$TESTBED_DIR/../.." && pwd)"
# shellcheck source=versions.env
source "$TESTBED_DIR/versions.env"

PROJECT_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/infinispan-operators"
# Runtime state (PKI, etcd data, logs, pids, kubeconfig) of one testbed.
RUN_DIR="${TESTBED_RUN_DIR:-$REPO_ROOT/target/testbed}"

# Ports, overridable so two testbeds (or parallel tests) never clash.
ETCD_CLIENT_PORT="${ETCD_CLIENT_PORT:-23790}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-23800}"
APISERVER_PORT="${APISERVER_PORT:-26443}"
KCM_PORT="${KCM_PORT:-26257}"
# Infinispan's single port (REST + Hot Rod) is 11222 + offset.
INFINISPAN_PORT_OFFSET="${INFINISPAN_PORT_OFFSET:-1000}"
INFINISPAN_JGROUPS_PORT="${INFINISPAN_JGROUPS_PORT:-17800}"
INFINISPAN_USER="${INFINISPAN_USER:-admin}"
SERVICE_CIDR="${SERVICE_CIDR:-10.96.0.0/16}"

# The node (node.sh): kubelet, kube-proxy, kube-scheduler, containerd, CoreDNS and a registry.
# TESTBED_NODE=0 leaves it out (a control plane and Infinispan processes only, as before).
TESTBED_NODE="${TESTBED_NODE:-1}"
NODE_NAME="${NODE_NAME:-testbed-node}"
# OLM on the node (olm.sh): its operators as pods, from an image built here. TESTBED_OLM=0 leaves
# it out; without a node there is none.
TESTBED_OLM="${TESTBED_OLM:-1}"
# The pod network: one bridge on this machine; pods reach the host and each other, nothing else
# (node.sh drops forwarded traffic to any other interface). The bridge's address is the node's
# InternalIP, where CoreDNS answers (the pods' nameserver) and the kube-apiserver is reachable.
POD_CIDR="${POD_CIDR:-10.244.0.0/24}"
NODE_BRIDGE="${NODE_BRIDGE:-ispn-testbed0}"
NODE_IP="${NODE_IP:-${POD_CIDR%.*/*}.1}"
CLUSTER_DOMAIN="${CLUSTER_DOMAIN:-cluster.local}"
# The OCI registry the node pulls from (images are built here and pushed to it).
REGISTRY_PORT="${REGISTRY_PORT:-25000}"
REGISTRY="127.0.0.1:$REGISTRY_PORT"
KUBELET_PORT="${KUBELET_PORT:-10250}"
KUBELET_HEALTHZ_PORT="${KUBELET_HEALTHZ_PORT:-10248}"
SCHEDULER_PORT="${SCHEDULER_PORT:-26259}"
KUBE_PROXY_HEALTHZ_PORT="${KUBE_PROXY_HEALTHZ_PORT:-10256}"
KUBE_PROXY_METRICS_PORT="${KUBE_PROXY_METRICS_PORT:-10249}"
# Sockets need short paths (108 bytes): the node's runtime state lives here, not in RUN_DIR.
NODE_STATE="${NODE_STATE:-/run/infinispan-testbed}"

log() { printf '[testbed %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[testbed] ERROR: %s\n' "$*" >&2; exit 1; }

# Print the last lines of a log file, indented, to stderr.
tail_log() {
  local file=$1
  if [[ -f $file ]]; then
    printf '  --- last lines of %s ---\n' "$file" >&2
    tail -n 25 "$file" | sed 's/^/  | /' >&2
  fi
}

# The version actually built: the first of the list with a completed build marker.
installed_version() {
  local prefix=$1 list=$2 v
  for v in $list; do
    if [[ -f $PROJECT_CACHE/$prefix-$v/.complete ]]; then
      echo "$v"
      return 0
    fi
  done
  return 1
}

k8s_bin_dir() { local v; v=$(installed_version k8s "$K8S_VERSIONS") || return 1; echo "$PROJECT_CACHE/k8s-$v/bin"; }
etcd_bin_dir() { local v; v=$(installed_version etcd "$ETCD_VERSIONS") || return 1; echo "$PROJECT_CACHE/etcd-$v/bin"; }
helm_bin() { local v; v=$(installed_version helm "$HELM_VERSIONS") || return 1; echo "$PROJECT_CACHE/helm-$v/bin/helm"; }
operator_sdk_bin() { local v; v=$(installed_version operator-sdk "$OPERATOR_SDK_VERSIONS") || return 1; echo "$PROJECT_CACHE/operator-sdk-$v/bin/operator-sdk"; }
scorecard_test_bin() { local v; v=$(installed_version scorecard-test "$OPERATOR_SDK_VERSIONS") || return 1; echo "$PROJECT_CACHE/scorecard-test-$v/bin/scorecard-test"; }
opm_bin() { local v; v=$(installed_version opm "$OPM_VERSIONS") || return 1; echo "$PROJECT_CACHE/opm-$v/bin/opm"; }
grpc_health_probe_bin() { local v; v=$(installed_version grpc-health-probe "$GRPC_HEALTH_PROBE_VERSIONS") || return 1; echo "$PROJECT_CACHE/grpc-health-probe-$v/bin/grpc_health_probe"; }
hadolint_bin() { local v; v=$(installed_version hadolint "$HADOLINT_VERSIONS") || return 1; echo "$PROJECT_CACHE/hadolint-$v/bin/hadolint"; }
containerd_bin_dir() { local v; v=$(installed_version containerd "$CONTAINERD_VERSIONS") || return 1; echo "$PROJECT_CACHE/containerd-$v/bin"; }
cni_bin_dir() { local v; v=$(installed_version cni "$CNI_PLUGINS_VERSIONS") || return 1; echo "$PROJECT_CACHE/cni-$v/bin"; }
coredns_bin() { local v; v=$(installed_version coredns "$COREDNS_VERSIONS") || return 1; echo "$PROJECT_CACHE/coredns-$v/bin/coredns"; }
registry_bin() { local v; v=$(installed_version registry "$REGISTRY_VERSIONS") || return 1; echo "$PROJECT_CACHE/registry-$v/bin/registry"; }
local_path_provisioner_bin() { local v; v=$(installed_version local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSIONS") || return 1; echo "$PROJECT_CACHE/local-path-provisioner-$v/bin/local-path-provisioner"; }
kube_router_bin() { local v; v=$(installed_version kube-router "$KUBE_ROUTER_VERSIONS") || return 1; echo "$PROJECT_CACHE/kube-router-$v/bin/kube-router"; }
olm_dir() { local v; v=$(installed_version olm "$OLM_VERSIONS") || return 1; echo "$PROJECT_CACHE/olm-$v"; }
crane_bin() { local v; v=$(installed_version crane "$CRANE_VERSIONS") || return 1; echo "$PROJECT_CACHE/crane-$v/bin/crane"; }
infinispan_home() { local v; v=$(installed_version infinispan "$INFINISPAN_VERSIONS") || return 1; echo "$PROJECT_CACHE/infinispan-$v"; }

# Java home for an Infinispan version: 16.1+ needs Java 25.
java_home_for() {
  local v=$1 major minor
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  if (( major > 16 || (major == 16 && minor >= 1) )); then
    echo "${JAVA25_HOME:-$JAVA25_HOME_DEFAULT}"
  else
    echo "${JAVA17_HOME:-$JAVA17_HOME_DEFAULT}"
  fi
}

# wait_for DESCRIPTION TIMEOUT_SECONDS LOGFILE PIDFILE COMMAND...: polls COMMAND every 0.5 s;
# fails at once, with the log's last lines, when the process of PIDFILE exits.
wait_for() {
  local what=$1 timeout=$2 logfile=$3 pidfile=$4; shift 4
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! pid_alive "$pidfile"; then
      printf '[testbed] ERROR: %s exited before it was ready\n' "$what" >&2
      tail_log "$logfile"
      return 1
    fi
    if (( SECONDS >= deadline )); then
      printf '[testbed] ERROR: %s not ready after %ss\n' "$what" "$timeout" >&2
      tail_log "$logfile"
      return 1
    fi
    sleep 0.5
  done
}

# Is the process recorded in pid file $1 alive?
# A zombie (killed, not yet reaped by its parent) is not alive: kill -0 still succeeds on it.
pid_alive() {
  [[ -f $1 ]] || return 1
  local pid state
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z ]]
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
