#!/usr/bin/env bash
# The testbed's node: this machine as a one-node Kubernetes cluster, so that what users install
# runs as real pods. Usage: node.sh up|down|status. up.sh runs `node.sh up` after the control
# plane (unless TESTBED_NODE=0); down.sh runs `node.sh down` first.
#
# What `up` starts (each a process recorded in $RUN_DIR/pids, its log in $RUN_DIR/logs):
#   registry        an OCI registry on 127.0.0.1:$REGISTRY_PORT, the node's only image source
#   containerd      2.x with the runc shim and Debian's runc (cgroupfs driver, cgroup v1)
#   kubelet         cgroup v1 allowed (failCgroupV1: false), node $NODE_NAME at $NODE_IP
#   kube-proxy      nftables mode (Service IPs from the host and from pods)
#   kube-scheduler
#   coredns         the cluster domain on $NODE_IP:53, from the API server; nothing else
#   local-path-provisioner   the StorageClass `local-path` (default), volumes under $RUN_DIR
#   kube-router     its firewall only: NetworkPolicies enforced with iptables (nf_tables
#                   backend) and ipsets, chains KUBE-ROUTER-*, KUBE-POD-FW-*, KUBE-NWPLCY-*
# and what they need: the bridge $NODE_BRIDGE ($POD_CIDR, the node's address $NODE_IP), the CNI
# configuration (bridge, host-local, loopback, portmap), the nftables table `inet
# infinispan_testbed` (pods reach this machine and each other; forwarded traffic to any other
# interface is dropped; the API server's port only from loopback and the bridge), the `kubernetes`
# Service's endpoints, and the sandbox (pause) and helper images built here and pushed.
#
# `down` removes every process, pod, mount, cgroup, interface and rule `up` made; `status` says
# what is left (and exits non-zero when anything is); `network` makes only the bridge and the
# firewall (up.sh runs it before the API server starts).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTBED_DIR/pki.sh"
source "$TESTBED_DIR/images.sh"

NODE_DIR=$RUN_DIR/node
PKI=$RUN_DIR/pki
API_URL="https://127.0.0.1:$APISERVER_PORT"
NFT_TABLE=infinispan_testbed
CONTAINERD_SOCK=$NODE_STATE/containerd/containerd.sock
CGROUP_ROOT_NAME=kubepods

kubectl_admin() { "$(k8s_bin_dir)/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" "$@"; }

start() {
  local name=$1; shift
  local pidfile=$RUN_DIR/pids/$name.pid logfile=$RUN_DIR/logs/$name.log
  setsid "$@" >>"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
}

# One node per machine (one bridge, one `kubepods` cgroup, the kubelet's ports): the testbed that
# made it owns it, recorded in $NODE_STATE/owner. Another testbed asking for a node is refused
# (private testbeds run with TESTBED_NODE=0), and never tears down a node it does not own.
owns_node() { [[ -f $NODE_STATE/owner && $(cat "$NODE_STATE/owner") == "$RUN_DIR" ]]; }

claim_node() {
  mkdir -p "$NODE_STATE"
  if [[ -f $NODE_STATE/owner ]] && ! owns_node; then
    local other
    other=$(cat "$NODE_STATE/owner")
    if [[ -d $other/node ]]; then
      die "this machine's testbed node belongs to the testbed in $other: one node per machine. Start this testbed with TESTBED_NODE=0, or take that one down (TESTBED_RUN_DIR=$other e2e/testbed/down.sh)"
    fi
    log "the node's previous owner $other is gone: taking the node over"
  fi
  echo "$RUN_DIR" >"$NODE_STATE/owner"
}

# --- network: bridge, sysctls, nftables
network_up() {
  claim_node
  if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NODE_BRIDGE" type bridge
  fi
  ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # Routing between pods, Services and the host; bridged traffic through netfilter so that a
  # pod's reply to another pod reached through a Service IP is un-NATed.
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1
  # Our own table: forward only within the bridge (nothing from a pod leaves this machine), and
  # the API server (which listens on every address so that pods reach it) only from loopback and
  # the bridge. Priority -10: before kube-proxy's and anyone else's filter chains.
  nft -f - <<NFT
table inet $NFT_TABLE
delete table inet $NFT_TABLE
table inet $NFT_TABLE {
  chain forward {
    type filter hook forward priority -10; policy accept;
    iifname "$NODE_BRIDGE" oifname != "$NODE_BRIDGE" counter drop comment "pods reach nothing beyond this machine"
    oifname "$NODE_BRIDGE" iifname != "$NODE_BRIDGE" counter drop comment "nothing from outside reaches pods"
  }
  chain input {
    type filter hook input priority -10; policy accept;
    tcp dport { $APISERVER_PORT, $KUBELET_PORT, $REGISTRY_PORT } iifname != { "lo", "$NODE_BRIDGE" } counter drop
  }
}
NFT
}

network_down() {
  nft delete table inet "$NFT_TABLE" 2>/dev/null || true
  kube_router_rules_down
  # kube-proxy's tables (nftables mode).
  nft delete table ip kube-proxy 2>/dev/null || true
  nft delete table ip6 kube-proxy 2>/dev/null || true
  # Pod veths go with their network namespaces; any left are removed with the bridge.
  local veth
  for veth in $(ip -o link show master "$NODE_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$veth" 2>/dev/null || true
  done
  ip link del "$NODE_BRIDGE" 2>/dev/null || true
}

# --- PKI and kubeconfigs of the node's components
pki_up() {
  issue_client_cert "$PKI" kubelet "system:node:$NODE_NAME" system:nodes
  issue_client_cert "$PKI" kube-proxy system:kube-proxy
  issue_client_cert "$PKI" kube-scheduler system:kube-scheduler
  issue_client_cert "$PKI" coredns testbed:coredns
  issue_client_cert "$PKI" local-path-provisioner testbed:local-path-provisioner
  issue_client_cert "$PKI" kube-router testbed:kube-router
  local c
  for c in kubelet kube-proxy kube-scheduler coredns local-path-provisioner kube-router; do
    write_kubeconfig "$NODE_DIR/$c.kubeconfig" "$API_URL" "$PKI" "$c"
  done
}

# --- registry
registry_up() {
  local bin data=$NODE_DIR/registry
  bin=$(registry_bin) || die "registry missing: run e2e/testbed/build.sh node"
  mkdir -p "$data"
  if pid_alive "$RUN_DIR/pids/registry.pid"; then
    log "registry already running"
  else
    port_in_use "$REGISTRY_PORT" && die "port $REGISTRY_PORT for the registry is in use (set REGISTRY_PORT)"
    cat >"$NODE_DIR/registry.yml" <<YML
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $data}
  delete: {enabled: true}
http:
  addr: 127.0.0.1:$REGISTRY_PORT
YML
    log "starting the registry on $REGISTRY"
    OTEL_TRACES_EXPORTER=none start registry "$bin" serve "$NODE_DIR/registry.yml"
  fi
  wait_for registry 30 "$RUN_DIR/logs/registry.log" "$RUN_DIR/pids/registry.pid" \
    curl -sf "http://$REGISTRY/v2/"
}

# --- containerd
containerd_up() {
  local bin cni
  bin=$(containerd_bin_dir) || die "containerd missing: run e2e/testbed/build.sh node"
  cni=$(cni_bin_dir) || die "CNI plugins missing: run e2e/testbed/build.sh node"
  command -v runc >/dev/null || die "runc missing: apt-get install runc"
  mkdir -p "$NODE_DIR/containerd/root" "$NODE_STATE/containerd" "$NODE_DIR/cni/net.d" \
    "$NODE_DIR/cni/ipam" "$NODE_DIR/containerd/certs.d/$REGISTRY"
  # The node pulls from the local registry over plain HTTP (loopback only). Every other
  # registry (quay.io, docker.io, ...) resolves to a closed port on loopback: a pull of an image
  # that was not built here fails at once with "connection refused" and nothing leaves this
  # machine.
  mkdir -p "$NODE_DIR/containerd/certs.d/_default"
  cat >"$NODE_DIR/containerd/certs.d/$REGISTRY/hosts.toml" <<TOML
server = "http://$REGISTRY"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
TOML
  cat >"$NODE_DIR/containerd/certs.d/_default/hosts.toml" <<TOML
server = "http://127.0.0.1:9"
[host."http://127.0.0.1:9"]
  capabilities = ["pull", "resolve"]
TOML
  cat >"$NODE_DIR/cni/net.d/10-testbed.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "testbed",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NODE_DIR/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  cat >"$NODE_DIR/containerd/config.toml" <<TOML
version = 3
root = "$NODE_DIR/containerd/root"
state = "$NODE_STATE/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  level = "warn"
[metrics]
  address = ""
[plugins.'io.containerd.internal.v1.opt']
  path = "$NODE_DIR/containerd/opt"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$(pause_image)"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$NODE_DIR/containerd/certs.d"
[plugins.'io.containerd.cri.v1.runtime']
  # This machine withholds CAP_SYS_RESOURCE, so no process may lower its OOM score: the
  # kubelet's -998 for sandboxes (and -997 for Guaranteed pods) would fail every pod
  # ("failed to update /proc/self/oom_score_adj: Permission denied"). Scores below containerd's
  # own become containerd's own.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$cni"]
    conf_dir = "$NODE_DIR/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "${TESTBED_RUNC:-$(command -v runc)}"
        Root = "$NODE_STATE/runc"
        SystemdCgroup = false
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
TOML
  if pid_alive "$RUN_DIR/pids/containerd.pid"; then
    log "containerd already running"
  else
    log "starting containerd $("$bin/containerd" --version | awk '{print $3}')"
    PATH="$bin:$PATH" start containerd "$bin/containerd" --config "$NODE_DIR/containerd/config.toml"
  fi
  wait_for containerd 30 "$RUN_DIR/logs/containerd.log" "$RUN_DIR/pids/containerd.pid" \
    "$bin/ctr" --address "$CONTAINERD_SOCK" version
}

# --- kubelet
kubelet_up() {
  local k8s
  k8s=$(k8s_bin_dir)
  mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs"
  # Pods with dnsPolicy Default get this (nothing beyond the cluster); ClusterFirst pods get the
  # cluster DNS.
  printf 'nameserver %s\n' "$NODE_IP" >"$NODE_DIR/resolv.conf"
  cat >"$NODE_DIR/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only (Kubernetes 1.35+ refuses it unless told), no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: $CLUSTER_DOMAIN
clusterDNS: [$NODE_IP]
resolvConf: $NODE_DIR/resolv.conf
podLogsDir: $NODE_DIR/pod-logs
failSwapOn: false
# No CAP_SYS_RESOURCE here (see containerd's restrict_oom_score_adj): the kubelet keeps its score.
oomScoreAdj: 0
serializeImagePulls: false
# The machine's disk is shared with everything else: evict only when it is really short.
evictionHard: {memory.available: 200Mi, nodefs.available: 2Gi, imagefs.available: 2Gi}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 60
protectKernelDefaults: false
YAML
  if pid_alive "$RUN_DIR/pids/kubelet.pid"; then
    log "kubelet already running"
  else
    log "starting kubelet (node $NODE_NAME, $NODE_IP)"
    start kubelet "$k8s/kubelet" --config "$NODE_DIR/kubelet.yaml" \
      --kubeconfig "$NODE_DIR/kubelet.kubeconfig" --root-dir "$NODE_DIR/kubelet" \
      --cert-dir "$NODE_DIR/kubelet/pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
      --v 1
  fi
  wait_for kubelet 60 "$RUN_DIR/logs/kubelet.log" "$RUN_DIR/pids/kubelet.pid" \
    curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"
}

# --- kube-proxy and kube-scheduler
kube_proxy_up() {
  local k8s
  k8s=$(k8s_bin_dir)
  # Written only when it changes: kube-proxy watches its configuration file and exits when it
  # is written, even with the same content (a second `make testbed-up` stopped it).
  cat >"$NODE_DIR/kube-proxy.yaml.new" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: $NODE_DIR/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$KUBE_PROXY_METRICS_PORT
# NodePorts only on the node's own address (never the machine's other interfaces).
nodePortAddresses: ["$NODE_IP/32"]
conntrack: {maxPerCore: 0}
oomScoreAdj: 0
YAML
  if cmp -s "$NODE_DIR/kube-proxy.yaml.new" "$NODE_DIR/kube-proxy.yaml"; then
    rm -f "$NODE_DIR/kube-proxy.yaml.new"
  else
    mv "$NODE_DIR/kube-proxy.yaml.new" "$NODE_DIR/kube-proxy.yaml"
  fi
  if pid_alive "$RUN_DIR/pids/kube-proxy.pid"; then
    log "kube-proxy already running"
  else
    log "starting kube-proxy"
    start kube-proxy "$k8s/kube-proxy" --config "$NODE_DIR/kube-proxy.yaml"
  fi
  wait_for kube-proxy 60 "$RUN_DIR/logs/kube-proxy.log" "$RUN_DIR/pids/kube-proxy.pid" \
    curl -sf "http://127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT/healthz"
}

scheduler_up() {
  local k8s
  k8s=$(k8s_bin_dir)
  if pid_alive "$RUN_DIR/pids/kube-scheduler.pid"; then
    log "kube-scheduler already running"
  else
    port_in_use "$SCHEDULER_PORT" && die "port $SCHEDULER_PORT for kube-scheduler is in use (set SCHEDULER_PORT)"
    log "starting kube-scheduler"
    start kube-scheduler "$k8s/kube-scheduler" --kubeconfig "$NODE_DIR/kube-scheduler.kubeconfig" \
      --authentication-kubeconfig "$NODE_DIR/kube-scheduler.kubeconfig" \
      --authorization-kubeconfig "$NODE_DIR/kube-scheduler.kubeconfig" \
      --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false
  fi
  wait_for kube-scheduler 60 "$RUN_DIR/logs/kube-scheduler.log" "$RUN_DIR/pids/kube-scheduler.pid" \
    curl -skf "https://127.0.0.1:$SCHEDULER_PORT/healthz"
}

# --- cluster objects the node's components need: their RBAC, the `kubernetes` Service's
# endpoints (the API server runs with --endpoint-reconciler-type=none), the StorageClass.
cluster_objects_up() {
  kubectl_admin apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "testbed:coredns"}
rules:
- apiGroups: [""]
  resources: [services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "testbed:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "testbed:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "testbed:coredns"}]
---
# kube-router's firewall reads pods, namespaces and NetworkPolicies, and its own Node; it waits
# for the caches of Services and their endpoints too (shared with its proxy) before it starts.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "testbed:kube-router"}
rules:
- apiGroups: [""]
  resources: [pods, namespaces, nodes, services, endpoints]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "testbed:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "testbed:kube-router"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "testbed:kube-router"}]
---
# kube-proxy: system:node-proxier is bootstrapped for the user system:kube-proxy already.
# The local-path provisioner: PVs, PVCs, StorageClasses, Events, its helper pods and ConfigMap.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "testbed:local-path-provisioner"}
rules:
- apiGroups: [""]
  resources: [nodes, persistentvolumeclaims, configmaps, pods, pods/log]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "testbed:local-path-provisioner"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "testbed:local-path-provisioner"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "testbed:local-path-provisioner"}]
---
apiVersion: v1
kind: Namespace
metadata:
  name: local-path-storage
  # Its helper pods mount the volumes' host directory to create and remove them.
  labels: {pod-security.kubernetes.io/enforce: privileged}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: "testbed:local-path-provisioner", namespace: local-path-storage}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: "testbed:local-path-provisioner", namespace: local-path-storage}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: "testbed:local-path-provisioner"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "testbed:local-path-provisioner"}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: local-path-provisioner, namespace: local-path-storage}
automountServiceAccountToken: false
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-path-config, namespace: local-path-storage}
data:
  config.json: |-
    {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$NODE_DIR/volumes"]}]}
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata: {name: helper-pod}
    spec:
      automountServiceAccountToken: false
      containers:
      - name: helper-pod
        image: $(helper_image)
        imagePullPolicy: IfNotPresent
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes, endpointslice.kubernetes.io/managed-by: testbed}
addressType: IPv4
endpoints: [{addresses: ["$NODE_IP"], conditions: {ready: true}}]
ports: [{name: https, port: $APISERVER_PORT, protocol: TCP}]
YAML
}

# --- CoreDNS: the cluster domain from the API server, on the node's address; no forwarding
# (names outside the cluster are NXDOMAIN: nothing outside this machine is reachable anyway).
coredns_up() {
  local bin
  bin=$(coredns_bin) || die "CoreDNS missing: run e2e/testbed/build.sh node"
  cat >"$NODE_DIR/Corefile" <<COREFILE
$CLUSTER_DOMAIN:53 in-addr.arpa:53 ip6.arpa:53 {
  bind $NODE_IP
  errors
  kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
    kubeconfig $NODE_DIR/coredns.kubeconfig
    pods insecure
    fallthrough in-addr.arpa ip6.arpa
    ttl 5
  }
  cache 5
}
.:53 {
  bind $NODE_IP
  errors
  template ANY ANY {
    rcode NXDOMAIN
  }
}
COREFILE
  if pid_alive "$RUN_DIR/pids/coredns.pid"; then
    log "CoreDNS already running"
  else
    log "starting CoreDNS on $NODE_IP:53 ($CLUSTER_DOMAIN)"
    start coredns "$bin" -conf "$NODE_DIR/Corefile" -dns.port 53
  fi
  # Ready once it answers for the API server's own Service.
  wait_for CoreDNS 60 "$RUN_DIR/logs/coredns.log" "$RUN_DIR/pids/coredns.pid" \
    dns_answers "kubernetes.default.svc.$CLUSTER_DOMAIN"
}

# dns_answers NAME: does the cluster DNS resolve NAME? (getent cannot choose the server.)
dns_answers() {
  python3 - "$NODE_IP" "$1" <<'PY'
import socket, struct, sys
server, name = sys.argv[1], sys.argv[2]
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.sendto(q, (server, 53))
r = s.recv(512)
sys.exit(0 if (r[3] & 0xF) == 0 and struct.unpack(">H", r[6:8])[0] > 0 else 1)
PY
}

local_path_provisioner_up() {
  local bin
  bin=$(local_path_provisioner_bin) || die "local-path-provisioner missing: run e2e/testbed/build.sh node"
  mkdir -p "$NODE_DIR/volumes"
  if pid_alive "$RUN_DIR/pids/local-path-provisioner.pid"; then
    log "local-path-provisioner already running"
  else
    log "starting local-path-provisioner (volumes in $NODE_DIR/volumes)"
    start local-path-provisioner "$bin" start --kubeconfig "$NODE_DIR/local-path-provisioner.kubeconfig" \
      --namespace local-path-storage --service-account-name local-path-provisioner \
      --helper-image "$(helper_image)"
  fi
  sleep 1
  pid_alive "$RUN_DIR/pids/local-path-provisioner.pid" || {
    tail_log "$RUN_DIR/logs/local-path-provisioner.log"
    die "local-path-provisioner exited"
  }
}

# --- kube-router: the NetworkPolicy enforcer (its firewall only: no BGP router, no service
# proxy, no CNI; health and metrics ports off). Ready once its chains are in the filter table.
kube_router_up() {
  local bin
  bin=$(kube_router_bin) || die "kube-router missing: run e2e/testbed/build.sh node"
  command -v ipset >/dev/null || die "ipset missing: apt-get install ipset"
  command -v iptables >/dev/null || die "iptables missing: apt-get install iptables"
  if pid_alive "$RUN_DIR/pids/kube-router.pid"; then
    log "kube-router already running"
  else
    log "starting kube-router (NetworkPolicy firewall only)"
    start kube-router "$bin" --kubeconfig "$NODE_DIR/kube-router.kubeconfig" \
      --hostname-override "$NODE_NAME" --run-firewall=true --run-router=false \
      --run-service-proxy=false --enable-cni=false --enable-ipv6=false \
      --service-cluster-ip-range "$SERVICE_CIDR" --health-port 0 --metrics-port 0 -v 1
  fi
  wait_for kube-router 60 "$RUN_DIR/logs/kube-router.log" "$RUN_DIR/pids/kube-router.pid" \
    iptables -w -n -L KUBE-ROUTER-FORWARD
}

# kube-router's rules, chains and ipsets (it leaves them when it stops): the jumps from the
# built-in chains first, then its chains (flushed, then deleted), then its sets.
kube_router_rules_down() {
  command -v iptables >/dev/null || return 0
  local rule chain set
  for chain in INPUT FORWARD OUTPUT; do
    while read -r rule; do
      [[ -n $rule ]] || continue
      eval "iptables -w ${rule/#-A/-D}" 2>/dev/null || true
    done < <(iptables -w -S "$chain" 2>/dev/null | grep -e '-j KUBE-ROUTER-' || true)
  done
  local chains
  chains=$(iptables -w -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-(ROUTER-|POD-FW-|NWPLCY-)/ {print $2}')
  for chain in $chains; do iptables -w -F "$chain" 2>/dev/null || true; done
  for chain in $chains; do iptables -w -X "$chain" 2>/dev/null || true; done
  command -v ipset >/dev/null || return 0
  for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-(SRC|DST)-|kube-router-)' || true); do
    ipset destroy "$set" 2>/dev/null || true
  done
}

node_ready() {
  [[ $(kubectl_admin get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

up() {
  mkdir -p "$NODE_DIR" "$NODE_STATE" "$RUN_DIR/logs" "$RUN_DIR/pids"
  network_up
  pki_up
  registry_up
  push_node_images
  containerd_up
  cluster_objects_up
  coredns_up
  scheduler_up
  # kube-proxy waits for its Node object, which the kubelet registers.
  kubelet_up
  kube_proxy_up
  kube_router_up
  local_path_provisioner_up
  wait_for "node $NODE_NAME Ready" 120 "$RUN_DIR/logs/kubelet.log" "$RUN_DIR/pids/kubelet.pid" node_ready
  log "node $NODE_NAME is Ready: pods on $POD_CIDR (bridge $NODE_BRIDGE), images from $REGISTRY"
}

# --- down: the order matters. The kubelet goes first (it would restart what we stop), then every
# pod sandbox and container through the runtime, containerd, the other processes, the mounts
# under the node's directories, the cgroups, the network.
stop_pid() {
  local name=$1 pidfile=$RUN_DIR/pids/$1.pid pid
  pid_alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then kill -KILL "$pid" 2>/dev/null || true; fi
    sleep 0.2
  done
  rm -f "$pidfile"
  log "stopped $name (pid $pid)"
}

# Removing containers through containerd bypasses CNI: the pods' network namespaces (bind mounts
# under /var/run/netns, named in each sandbox's spec) are removed by hand; their veths go with them.
POD_NETNS=()
remove_containers() {
  local bin ctr ns id
  bin=$(containerd_bin_dir 2>/dev/null) || return 0
  ctr=("$bin/ctr" --address "$CONTAINERD_SOCK")
  [[ -S $CONTAINERD_SOCK ]] && pid_alive "$RUN_DIR/pids/containerd.pid" || return 0
  for id in $("${ctr[@]}" -n k8s.io containers list -q 2>/dev/null); do
    mapfile -t -O "${#POD_NETNS[@]}" POD_NETNS < <("${ctr[@]}" -n k8s.io containers info "$id" 2>/dev/null \
      | grep -o '"/var/run/netns/cni-[0-9a-f-]*"' | tr -d '"' | sort -u)
  done
  for ns in $("${ctr[@]}" namespaces list -q 2>/dev/null); do
    for id in $("${ctr[@]}" -n "$ns" tasks list -q 2>/dev/null); do
      "${ctr[@]}" -n "$ns" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    for id in $("${ctr[@]}" -n "$ns" tasks list -q 2>/dev/null); do
      local deadline=$((SECONDS + 10))
      while "${ctr[@]}" -n "$ns" tasks list -q 2>/dev/null | grep -qx "$id" && ((SECONDS < deadline)); do
        "${ctr[@]}" -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 || sleep 0.2
      done
    done
    for id in $("${ctr[@]}" -n "$ns" containers list -q 2>/dev/null); do
      "${ctr[@]}" -n "$ns" containers delete "$id" >/dev/null 2>&1 || true
    done
  done
}

# Shims outlive containerd by design; ours are the ones whose -address is our socket.
kill_shims() {
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
}

unmount_under() {
  local dir mp
  for dir in "$@"; do
    [[ -d $dir ]] || continue
    # Deepest first.
    for mp in $(awk '{print $5}' /proc/self/mountinfo | grep -E "^$(realpath "$dir")(/|$)" | sort -r); do
      umount -l "$mp" 2>/dev/null || true
    done
  done
}

# The kubelet's cgroups (kubepods under every hierarchy) and the containers' (runc puts a pod's
# containers under kubepods too): removed deepest first, once no process is left in them.
remove_cgroups() {
  local hierarchy dir
  for hierarchy in /sys/fs/cgroup/*/; do
    [[ -d $hierarchy$CGROUP_ROOT_NAME ]] || continue
    find "$hierarchy$CGROUP_ROOT_NAME" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  for hierarchy in /sys/fs/cgroup/*/; do
    if [[ -d $hierarchy$CGROUP_ROOT_NAME ]]; then
      log "WARNING: cgroup $hierarchy$CGROUP_ROOT_NAME still there (a process left in it?)"
    fi
  done
}

down() {
  if [[ -f $NODE_STATE/owner ]] && ! owns_node; then
    log "the node belongs to the testbed in $(cat "$NODE_STATE/owner"): left alone"
    return 0
  fi
  stop_pid kubelet
  stop_pid kube-router
  stop_pid local-path-provisioner
  remove_containers
  stop_pid containerd
  kill_shims
  stop_pid kube-proxy
  stop_pid kube-scheduler
  stop_pid coredns
  stop_pid registry
  unmount_under "$NODE_DIR" "$NODE_STATE"
  local netns
  for netns in $(printf '%s\n' "${POD_NETNS[@]}" | sort -u); do
    umount "$netns" 2>/dev/null || true
    rm -f "$netns"
  done
  remove_cgroups
  network_down
  rm -rf "$NODE_STATE"
  # Paths the components hard-code outside their configured directories: the shim's socket and
  # fifo directories, the kubelet's device-plugin socket and container log links, libcni's
  # result cache (entries of our network `testbed` and of loopback). Directories go only when
  # empty (another runtime on this machine would keep them in use).
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/cni/results/testbed-* /var/lib/cni/results/cni-loopback-*
  rmdir /run/containerd/s /run/containerd/fifo /run/containerd /var/lib/kubelet/device-plugins \
    /var/lib/kubelet /var/log/containers /var/lib/cni/results /var/lib/cni 2>/dev/null || true
}

# status: what of the node is still on this machine. Exit 1 when anything is.
status() {
  local left=() name hierarchy
  for name in kubelet containerd kube-proxy kube-scheduler coredns registry local-path-provisioner kube-router; do
    pid_alive "$RUN_DIR/pids/$name.pid" && left+=("process $name")
  done
  pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" >/dev/null && left+=("containerd shims")
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 && left+=("interface $NODE_BRIDGE")
  nft list table inet "$NFT_TABLE" >/dev/null 2>&1 && left+=("nftables table inet $NFT_TABLE")
  nft list table ip kube-proxy >/dev/null 2>&1 && left+=("nftables table ip kube-proxy")
  iptables -w -S 2>/dev/null | grep -qE '^-N KUBE-(ROUTER-|POD-FW-|NWPLCY-)' && left+=("kube-router's iptables chains")
  ipset list -n 2>/dev/null | grep -qE '^(KUBE-(SRC|DST)-|kube-router-)' && left+=("kube-router's ipsets")
  if [[ -d $NODE_DIR ]] && awk '{print $5}' /proc/self/mountinfo | grep -qE "^$(realpath "$NODE_DIR")(/|$)"; then
    left+=("mounts under $NODE_DIR")
  fi
  [[ -d $NODE_STATE ]] && left+=("$NODE_STATE")
  # The testbed's containerd is the only CRI runtime on the project's machines: any pod network
  # namespace left is the node's.
  compgen -G "/var/run/netns/cni-*" >/dev/null && left+=("pod network namespaces in /var/run/netns")
  compgen -G "/var/lib/cni/results/testbed-*" >/dev/null && left+=("CNI results in /var/lib/cni/results")
  [[ -e /var/lib/kubelet/device-plugins/kubelet.sock ]] && left+=("/var/lib/kubelet/device-plugins/kubelet.sock")
  for hierarchy in /sys/fs/cgroup/*/; do
    [[ -d $hierarchy$CGROUP_ROOT_NAME ]] && left+=("cgroup $hierarchy$CGROUP_ROOT_NAME")
  done
  if ((${#left[@]})); then
    printf '%s\n' "${left[@]}"
    return 1
  fi
  echo "nothing of the node is left"
}

case ${1:-} in
  network) mkdir -p "$NODE_DIR"; network_up ;;
  up) up ;;
  down) down ;;
  status) status ;;
  # One step, for whoever debugs the node: e.g. `node.sh step containerd_up`.
  step) shift; "$@" ;;
  *) die "usage: node.sh network|up|down|status" ;;
esac
