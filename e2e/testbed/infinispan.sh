#!/usr/bin/env bash
# Runs Infinispan server nodes of the testbed as local processes on 127.0.0.1.
#
#   infinispan.sh start NAME [--offset N] [--cluster NAME] [--jgroups-port P] [--peers "h[p],h[p]"] [--heap 512m]
#                      [--config FILE]   server XML to use instead of infinispan/infinispan.xml
#                                        (e.g. infinispan/infinispan-digest-only.xml)
#                      [--conf-file FILE]  copy FILE into the node's conf dir before starting (repeatable;
#                                        e.g. the PEM keystore that infinispan/infinispan-tls.xml reads)
#                      [--ca FILE]       the node serves TLS: probe its health over https, trusting the
#                                        CA certificate(s) in FILE (PEM)
#                      [--nice N]        run the node at niceness N, its scheduler autogroup included
#                                        (each node is a session of its own: with autogroup on, as
#                                        here, a session's niceness is what weighs against the API
#                                        server's, the process's own only within its session)
#   infinispan.sh stop NAME [--wipe]      stop a node (SIGTERM, then SIGKILL after 20 s); --wipe deletes its state
#   infinispan.sh kill NAME               SIGKILL a node (state kept)
#   infinispan.sh status NAME [--offset N] [--ca FILE]   exit 0 when the node answers HEALTHY
#   infinispan.sh cli NAME [--offset N] COMMAND...   runs the Infinispan CLI (the server's own
#                                        infinispan-cli-client) against the node, one argument per
#                                        command line, e.g. 'alter cache c --attribute=memory.max-count --value=9';
#                                        exit 3 when the CLI prints an error
#
# Each node has its own server root under $RUN_DIR/infinispan/NAME (conf/, data/, log/) and its
# REST + Hot Rod port at 11222 + offset. Nodes given the same --cluster and each other as --peers
# form one cluster over TCPPING. Credentials: $RUN_DIR/infinispan/credentials (one user, admin role,
# shared by every node of this testbed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

node_root() { echo "$RUN_DIR/infinispan/$1"; }

credentials_file() { echo "$RUN_DIR/infinispan/credentials"; }

ensure_credentials() {
  local file
  file=$(credentials_file)
  mkdir -p "$(dirname "$file")"
  if [[ ! -f $file ]]; then
    local pw
    pw=$(openssl rand -hex 16)
    umask 077
    printf 'INFINISPAN_USER=%s\nINFINISPAN_PASSWORD=%s\n' "$INFINISPAN_USER" "$pw" >"$file"
  fi
}

node_port() { echo $((11222 + $1)); }

# health PORT [CA_FILE]: with a CA file the node is probed over https (TLS-only endpoint).
health() {
  local port=$1 ca=${2:-}
  if [[ -n $ca ]]; then
    [[ $(curl -s -m 2 --cacert "$ca" "https://127.0.0.1:$port/rest/v2/container/health/status") == HEALTHY* ]]
  else
    [[ $(curl -s -m 2 "http://127.0.0.1:$port/rest/v2/container/health/status") == HEALTHY* ]]
  fi
}

start_node() {
  local name=$1; shift
  local offset=$INFINISPAN_PORT_OFFSET cluster=testbed jport=$INFINISPAN_JGROUPS_PORT peers="" heap=512m
  local config=$TESTBED_DIR/infinispan/infinispan.xml ca="" conf_files=() nice=""
  while (($#)); do
    case $1 in
      --offset) offset=$2; shift 2 ;;
      --cluster) cluster=$2; shift 2 ;;
      --jgroups-port) jport=$2; shift 2 ;;
      --peers) peers=$2; shift 2 ;;
      --heap) heap=$2; shift 2 ;;
      --config) config=$2; shift 2 ;;
      --conf-file) conf_files+=("$2"); shift 2 ;;
      --ca) ca=$2; shift 2 ;;
      --nice) nice=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ -n $peers ]] || peers="127.0.0.1[$jport]"
  [[ -z $nice || $nice =~ ^[0-9]+$ ]] || die "--nice takes a niceness 0-19, not $nice"
  [[ -f $config ]] || die "server configuration $config not found"
  local f
  for f in ${conf_files[@]+"${conf_files[@]}"}; do [[ -f $f ]] || die "file $f (--conf-file) not found"; done
  [[ -z $ca || -f $ca ]] || die "CA file $ca (--ca) not found"
  local home version java_home root port
  home=$(infinispan_home) || die "Infinispan is not built: run 'make testbed-build' (or e2e/testbed/build.sh infinispan)"
  version=$(cat "$home/VERSION")
  java_home=$(cat "$home/JAVA_HOME")
  root=$(node_root "$name")
  port=$(node_port "$offset")
  local pidfile=$root/pid logfile=$root/log/server.log
  if pid_alive "$pidfile"; then
    if health "$port" "$ca"; then
      log "Infinispan node $name already running (pid $(cat "$pidfile"), port $port)"
      return 0
    fi
  else
    if port_in_use "$port"; then
      die "port $port (Infinispan node $name) is already in use by another process; set INFINISPAN_PORT_OFFSET"
    fi
    ensure_credentials
    # shellcheck disable=SC1090
    source "$(credentials_file)"
    mkdir -p "$root/conf" "$root/data" "$root/log"
    cp "$config" "$root/conf/infinispan.xml"
    cp "$TESTBED_DIR/infinispan/log4j2.xml" "$root/conf/"
    for f in ${conf_files[@]+"${conf_files[@]}"}; do cp "$f" "$root/conf/"; chmod 600 "$root/conf/$(basename "$f")"; done
    printf '#$REALM_NAME=default$\n#$ALGORITHM=clear$\n%s=%s\n' "$INFINISPAN_USER" "$INFINISPAN_PASSWORD" >"$root/conf/users.properties"
    printf '%s=admin\n' "$INFINISPAN_USER" >"$root/conf/groups.properties"
    chmod 600 "$root/conf/users.properties"
    log "starting Infinispan $version node $name on 127.0.0.1:$port (cluster $cluster, JGroups port $jport, Java $java_home)"
    # --nice: the new session sets its own autogroup's niceness (/proc/self/autogroup, where the
    # kernel has it), then runs the JVM at that niceness.
    local niced=()
    [[ -z $nice ]] || niced=(sh -c 'echo "$0" >/proc/self/autogroup 2>/dev/null; exec nice -n "$0" "$@"' "$nice")
    (
      cd "$root"
      exec setsid ${niced[@]+"${niced[@]}"} "$java_home/bin/java" -Xmx"$heap" -XX:+UseSerialGC -Djava.net.preferIPv4Stack=true \
        -Dinfinispan.server.home.path="$home" -Dinfinispan.server.lib.path="$home/server-lib" \
        -Dtestbed.jgroups.port="$jport" -Dtestbed.jgroups.initial-hosts="$peers" \
        -Dinfinispan.cluster.name="$cluster" \
        -cp "$home/lib/*" org.infinispan.server.Bootstrap \
        -s "$root" -c infinispan.xml -b 127.0.0.1 -k 127.0.0.1 -n "$name" -o "$offset"
    ) >>"$logfile" 2>&1 </dev/null &
    echo $! >"$pidfile"
  fi
  wait_for "Infinispan node $name (port $port)" "${INFINISPAN_START_TIMEOUT:-120}" "$logfile" "$pidfile" health "$port" "$ca"
  log "Infinispan node $name is HEALTHY at $([[ -n $ca ]] && echo https || echo http)://127.0.0.1:$port"
}

stop_node() {
  local name=$1 signal=${2:-TERM} wipe=${3:-}
  local root pidfile
  root=$(node_root "$name")
  pidfile=$root/pid
  if pid_alive "$pidfile"; then
    local pid
    pid=$(cat "$pidfile")
    kill "-$signal" "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then kill -KILL "$pid" 2>/dev/null || true; fi
      sleep 0.2
    done
    log "Infinispan node $name stopped ($signal)"
  fi
  rm -f "$pidfile"
  if [[ $wipe == wipe ]]; then
    rm -rf "$root/data"
    log "Infinispan node $name: state wiped"
  fi
}

# cli NAME OFFSET COMMAND...: the CLI in batch mode. The credentials go in a private batch file
# (mode 600, deleted after), never on a command line or in a URL.
run_cli() {
  local name=$1 offset=$2; shift 2
  (($#)) || die "usage: infinispan.sh cli NAME [--offset N] COMMAND..."
  local home java_home batch out status=0
  home=$(infinispan_home) || die "Infinispan is not built: run 'make testbed-build' (or e2e/testbed/build.sh infinispan)"
  java_home=$(cat "$home/JAVA_HOME")
  [[ -f $(credentials_file) ]] || die "no credentials for node $name: start it first (infinispan.sh start $name)"
  # shellcheck disable=SC1090
  source "$(credentials_file)"
  batch=$(umask 077 && mktemp)
  printf 'connect http://127.0.0.1:%s --username=%s --password=%s\n' \
    "$(node_port "$offset")" "$INFINISPAN_USER" "$INFINISPAN_PASSWORD" >"$batch"
  printf '%s\n' "$@" >>"$batch"
  out=$("$java_home/bin/java" -cp "$home/lib/*" org.infinispan.cli.commands.CLI --file="$batch" 2>&1) || status=$?
  rm -f "$batch"
  # The CLI's colours off, for logs.
  out=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g')
  printf '%s\n' "$out"
  # Batch mode exits 0 after a failed command: its "Error:" line says it.
  if ((status == 0)) && grep -q '^Error:' <<<"$out"; then status=3; fi
  return "$status"
}

cmd=${1:-}; name=${2:-}
[[ -n $cmd && -n $name ]] || die "usage: infinispan.sh start|stop|kill|status|cli NAME [options]"
shift 2
case $cmd in
  start) start_node "$name" "$@" ;;
  stop) stop_node "$name" TERM "$([[ ${1:-} == --wipe ]] && echo wipe)" ;;
  kill) stop_node "$name" KILL ;;
  cli)
    offset=$INFINISPAN_PORT_OFFSET
    if [[ ${1:-} == --offset ]]; then offset=$2; shift 2; fi
    run_cli "$name" "$offset" "$@"
    ;;
  status)
    offset=$INFINISPAN_PORT_OFFSET ca=""
    while (($#)); do
      case $1 in
        --offset) offset=$2; shift 2 ;;
        --ca) ca=$2; shift 2 ;;
        *) shift ;;
      esac
    done
    health "$(node_port "$offset")" "$ca"
    ;;
  *) die "unknown command $cmd" ;;
esac
