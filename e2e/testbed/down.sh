#!/usr/bin/env bash
# Stops exactly the processes this testbed started (by their recorded pids): whatever else was
# started under it (e.g. the demo's resources operator), every Infinispan
# node, then kube-controller-manager, kube-apiserver and etcd. State stays in $RUN_DIR unless
# --wipe is given.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stop_pidfile() {
  local name=$1 pidfile=$2
  if pid_alive "$pidfile"; then
    local pid
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then
        log "$name (pid $pid) ignored SIGTERM for 20s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.2
    done
    log "stopped $name (pid $pid)"
  fi
  rm -f "$pidfile"
}

# The node first: its kubelet would restart what goes next, and its pods use the API server.
if [[ -d $RUN_DIR/node ]]; then
  "$TESTBED_DIR/node.sh" down
fi

# Anything else started under this testbed (e.g. the demo's resources operator) goes first.
for pidfile in "$RUN_DIR"/pids/*.pid; do
  [[ -f $pidfile ]] || continue
  name=$(basename "$pidfile" .pid)
  case $name in kube-controller-manager | kube-apiserver | etcd) continue ;; esac
  stop_pidfile "$name" "$pidfile"
done
if [[ -d $RUN_DIR/infinispan ]]; then
  for node in "$RUN_DIR"/infinispan/*/; do
    [[ -f $node/pid ]] && stop_pidfile "Infinispan $(basename "$node")" "$node/pid"
  done
fi
for name in kube-controller-manager kube-apiserver etcd; do
  stop_pidfile "$name" "$RUN_DIR/pids/$name.pid"
done
if [[ ${1:-} == --wipe ]]; then
  rm -rf "$RUN_DIR"
  log "removed $RUN_DIR"
fi
log "testbed is down"
