#!/bin/sh
# Runs the Infinispan server of this image in the foreground: our implementation of what the
# official distribution's bin/server.sh (16.0) does with its arguments and environment
# (see docs/server-image.md).
#
#   server.sh [--debug [PORT]] [--jmx [PORT]] [-Dname=value...] [SERVER ARGUMENTS...]
#
# -D arguments become JVM system properties; everything else goes to the server
# (org.infinispan.server.Bootstrap: -c/--server-config, -l/--logging-config, -s/--server-root,
# -b/--bind-address, -k/--cluster-address, -n/--node-name, -o/--port-offset, -P/--properties...).
#
# JVM options, when JAVA_OPTS is unset (JAVA_OPTS set replaces all of them, JAVA_OPTIONS included):
#   -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true -XX:+ExitOnOutOfMemoryError
#   -XX:MetaspaceSize=64M, then the heap:
#     RUN_IN_CONTAINER=true (or /.dockerenv or /run/.containerenv present): a share of the
#       container's memory limit, -XX:InitialRAMPercentage=50 -XX:MinRAMPercentage=70
#       -XX:MaxRAMPercentage=70 -XX:+UseCompressedOops
#     otherwise a fixed -Xms64m -Xmx512m
#   then JAVA_OPTIONS (later options win, so an -Xmx there overrides the percentages).
# Unless PRESERVE_JAVA_OPTS=true, also: -server, the module exports the server needs, a rotating
# GC log in the log directory (GC_LOG, default true) and a heap dump there on OutOfMemoryError
# (HEAP_DUMP, default true). DEBUG=true / --debug add a JDWP agent on DEBUG_PORT (8787), JMX=true /
# --jmx remote JMX on JMX_PORT (9999).
# Paths: server root $ISPN_HOME/server (-s, --server-root, -Dinfinispan.server.root.path), its
# conf/, data/ and log/ (-Dinfinispan.server.log.path). The JVM runs as a child: this shell relays
# HUP, INT (as TERM), QUIT, PIPE and TERM to it, writes its pid to ISPN_PIDFILE when set, starts
# it again when it exits with status 10 (server restart) and otherwise exits with its status.

script=$(readlink -f "$0")
bin_dir=$(dirname "$script")
resolved_home=$(cd "$bin_dir/.." && pwd)
if [ -z "${ISPN_HOME:-}" ]; then
  ISPN_HOME=$resolved_home
elif [ "$(cd "$ISPN_HOME" 2>/dev/null && pwd)" != "$resolved_home" ]; then
  echo "server.sh: WARNING: ISPN_HOME=$ISPN_HOME is not the installation of this script ($resolved_home)" >&2
fi
export ISPN_HOME

PROCESS_NAME=infinispan-server

# quote WORD: WORD as one single-quoted shell word (for eval).
quote() {
  printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}
is_port() {
  case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac
}

debug_mode=${DEBUG:-false}
debug_port=${DEBUG_PORT:-8787}
jmx_mode=${JMX:-false}
jmx_port=${JMX_PORT:-9999}
aot=${AOT:-false}
root_dir='' log_dir=''
jvm_props=''     # -D arguments of the command line, quoted
server_args=''   # arguments for the server, quoted

# Paths the server will use, from a -D option (command line, JAVA_OPTS, JAVA_OPTIONS, -P file).
note_property() {
  case $1 in
    -Dinfinispan.server.root.path=*) root_dir=${1#*=} ;;
    -Dinfinispan.server.log.path=*) log_dir=${1#*=} ;;
  esac
}

while [ "$#" -gt 0 ]; do
  case $1 in
    --aot) aot=true ;;
    --debug)
      debug_mode=true
      if [ "$#" -gt 1 ] && is_port "$2"; then debug_port=$2; shift; fi ;;
    --jmx)
      jmx_mode=true
      if [ "$#" -gt 1 ] && is_port "$2"; then jmx_port=$2; shift; fi ;;
    --)
      shift
      for arg in "$@"; do server_args="$server_args $(quote "$arg")"; done
      break ;;
    -D*)
      note_property "$1"
      jvm_props="$jvm_props $(quote "$1")" ;;
    -s | --server-root)
      [ "$#" -ge 2 ] || { echo "server.sh: $1 needs a directory" >&2; exit 1; }
      root_dir=$2
      server_args="$server_args $(quote "$1") $(quote "$2")"
      shift ;;
    --server-root=*)
      root_dir=${1#*=}
      server_args="$server_args $(quote "$1")" ;;
    -P | --properties)
      if [ "$#" -lt 2 ] || [ ! -f "$2" ]; then echo "server.sh: could not load property file: ${2:-}" >&2; exit 1; fi
      while IFS= read -r line || [ -n "$line" ]; do note_property "-D$line"; done <"$2"
      server_args="$server_args $(quote "$1") $(quote "$2")"
      shift ;;
    --properties=*)
      [ -f "${1#*=}" ] || { echo "server.sh: could not load property file: ${1#*=}" >&2; exit 1; }
      while IFS= read -r line || [ -n "$line" ]; do note_property "-D$line"; done <"${1#*=}"
      server_args="$server_args $(quote "$1")" ;;
    *) server_args="$server_args $(quote "$1")" ;;
  esac
  shift
done

# --- JVM options --------------------------------------------------------------------------------
if [ -z "${JAVA_OPTS:-}" ]; then
  JAVA_OPTS="-Djava.awt.headless=true -Djava.net.preferIPv4Stack=true -XX:+ExitOnOutOfMemoryError -XX:MetaspaceSize=64M"
  if [ -f /.dockerenv ] || [ -f /run/.containerenv ] || [ "${RUN_IN_CONTAINER:-}" = true ]; then
    JAVA_OPTS="$JAVA_OPTS -XX:InitialRAMPercentage=50 -XX:MinRAMPercentage=70 -XX:MaxRAMPercentage=70 -XX:+UseCompressedOops"
  else
    JAVA_OPTS="$JAVA_OPTS -Xms64m -Xmx512m"
  fi
  JAVA_OPTS="$JAVA_OPTS ${JAVA_OPTIONS:-}"
else
  echo "JAVA_OPTS already set in environment; overriding default settings with values: $JAVA_OPTS"
fi
set -f
# shellcheck disable=SC2086  # option strings, split on purpose
for opt in $JAVA_OPTS; do note_property "$(printf '%s' "$opt" | tr -d "'\"")"; done
set +f

if [ -z "${JAVA:-}" ]; then
  if [ -n "${JAVA_HOME:-}" ]; then JAVA=$JAVA_HOME/bin/java; else JAVA=java; fi
fi

# The Java feature version (17, 21, 25...): from the runtime's release file, else `java -version`.
java_version=''
java_release=$(dirname "$(dirname "$(readlink -f "$(command -v "$JAVA" || echo "$JAVA")")")")/release
if [ -r "$java_release" ]; then
  java_version=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$java_release")
fi
if [ -z "$java_version" ]; then
  java_version=$("$JAVA" -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -n 1)
fi
is_port "$java_version" || { echo "server.sh: cannot run $JAVA (no Java version found)" >&2; exit 1; }

case $root_dir in
  '') root_dir=$ISPN_HOME/server ;;
  *) root_dir=$(readlink -m "$root_dir") ;;
esac
case $log_dir in
  '') log_dir=$root_dir/log ;;
  *) log_dir=$(readlink -m "$log_dir") ;;
esac

if [ "${GC_LOG:-}" = '' ]; then GC_LOG=true; else echo "GC_LOG set in environment to $GC_LOG"; fi
if [ "${HEAP_DUMP:-}" = '' ]; then HEAP_DUMP=true; else echo "HEAP_DUMP set in environment to $HEAP_DUMP"; fi

prepend=''
if [ "$debug_mode" = true ]; then
  case $JAVA_OPTS in
    *-agentlib:jdwp*) echo "Debug already enabled in JAVA_OPTS, ignoring --debug argument" ;;
    *) JAVA_OPTS="$JAVA_OPTS -agentlib:jdwp=transport=dt_socket,address=$debug_port,server=y,suspend=n" ;;
  esac
fi
if [ "$jmx_mode" = true ]; then
  case $JAVA_OPTS in
    *-Dcom.sun.management.jmxremote*) echo "JMX already enabled in JAVA_OPTS, ignoring --jmx argument" ;;
    # Remote JMX authenticates against the server's security realm (JAAS, bin/server-jaas.config).
    *) JAVA_OPTS="$JAVA_OPTS -Dcom.sun.management.jmxremote.port=$jmx_port -Djava.security.auth.login.config=$(quote "$bin_dir/server-jaas.config") -Dcom.sun.management.jmxremote.login.config=ServerJMXConfig -Dcom.sun.management.jmxremote.ssl=false" ;;
  esac
fi

aot_cache=$root_dir/cache/$PROCESS_NAME.$(uname -m).aot
if [ "$aot" = true ] && [ "$java_version" -lt 25 ]; then
  echo "server.sh: --aot needs Java 25 or later; this is Java $java_version" >&2
  exit 1
fi

if [ "${PRESERVE_JAVA_OPTS:-}" != true ]; then
  case " $JAVA_OPTS " in
    *" -server "* | *" -client "*) ;;
    *) prepend="$prepend -server" ;;
  esac
  prepend="$prepend --add-exports java.naming/com.sun.jndi.ldap=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.util.concurrent=ALL-UNNAMED"
  if [ "$java_version" -ge 24 ]; then prepend="$prepend --enable-native-access=ALL-UNNAMED"; fi
  if [ "$java_version" -ge 25 ]; then
    prepend="$prepend -XX:+UseCompactObjectHeaders"
    if [ "$aot" = true ]; then
      mkdir -p "$root_dir/cache"
      prepend="$prepend $(quote "-XX:AOTCacheOutput=$aot_cache") -Dinfinispan.shutdown.immediately=true -Djgroups.join_timeout=0"
    elif [ -f "$aot_cache" ]; then
      prepend="$prepend -XX:AOTMode=on $(quote "-XX:AOTCache=$aot_cache")"
    fi
  fi
  if [ "$GC_LOG" = true ]; then
    case $JAVA_OPTS in
      *-Xlog:gc* | *-Xlog:*gc*) ;;   # the user's own GC logging wins
      *)
        if mkdir -p "$log_dir" 2>/dev/null && [ -w "$log_dir" ]; then
          # Keep the previous run's GC logs once.
          for f in "$log_dir"/gc.log "$log_dir"/gc.log.[0-9]*; do
            [ -e "$f" ] && mv -f "$f" "$log_dir/backup${f##*/}"
          done
          prepend="$prepend $(quote "-Xlog:gc*:file=$log_dir/gc.log:time,uptimemillis:filecount=5,filesize=3M")"
        else
          echo "server.sh: $log_dir is not writable: no GC log"
        fi ;;
    esac
  fi
  if [ "$HEAP_DUMP" = true ]; then
    prepend="$prepend -XX:+HeapDumpOnOutOfMemoryError $(quote "-XX:HeapDumpPath=$log_dir") $(quote "-XX:ErrorFile=$log_dir/hs_err_pid_%p.log") $(quote "-XX:ReplayDataFile=$log_dir/replay_pid%p.log")"
  fi
fi

runtime_jar=''
for jar in "$ISPN_HOME"/lib/infinispan-server-runtime-*.jar; do
  [ -f "$jar" ] && runtime_jar=$jar
done
[ -n "$runtime_jar" ] || { echo "server.sh: no infinispan-server-runtime jar in $ISPN_HOME/lib" >&2; exit 1; }

# JAVA_OPTS (and JAVA_OPTIONS in it) are interpreted by the shell like the official script does
# (eval: quotes inside them group words); every other word is quoted.
command="$(quote "$JAVA") $prepend $jvm_props $JAVA_OPTS -Dvisualvm.display.name=$PROCESS_NAME"
command="$command -Djava.util.logging.manager=org.infinispan.server.loader.LogManager"
# The official script runs `-jar infinispan-server-runtime-*.jar`, whose manifest Class-Path names
# the exact jars of the official distribution. This image's lib/ is resolved from Maven Central by
# the testbed (e2e/testbed/build.sh) and some versions differ (e.g. wildfly-common, lucene): the
# whole of lib/ goes on the class path instead, with the same main class.
command="$command $(quote "-Dinfinispan.server.home.path=$ISPN_HOME") -cp $(quote "$ISPN_HOME/lib/*") org.infinispan.server.Bootstrap $server_args"

# --- run ----------------------------------------------------------------------------------------
while :; do
  eval "$command" '&'
  pid=$!
  trap 'echo "*** relaying SIGHUP to the server ($pid) ***" >&2; kill -HUP $pid 2>/dev/null' HUP
  trap 'echo "*** relaying SIGINT to the server ($pid) as SIGTERM ***" >&2; kill -TERM $pid 2>/dev/null' INT
  trap 'echo "*** relaying SIGQUIT to the server ($pid) ***" >&2; kill -QUIT $pid 2>/dev/null' QUIT
  trap 'kill -PIPE $pid 2>/dev/null' PIPE
  trap 'echo "*** relaying SIGTERM to the server ($pid) ***" >&2; kill -TERM $pid 2>/dev/null' TERM
  if [ -n "${ISPN_PIDFILE:-}" ]; then
    echo "$pid" >"$ISPN_PIDFILE"
  fi
  # `wait` also returns (above 128) when a trapped signal interrupts it: wait again while the
  # server still runs.
  while :; do
    wait "$pid"
    status=$?
    if [ "$status" -lt 128 ] || ! kill -0 "$pid" 2>/dev/null; then
      break
    fi
  done
  trap - HUP INT QUIT PIPE TERM
  if [ -n "${ISPN_PIDFILE:-}" ] && [ "$(cat "$ISPN_PIDFILE" 2>/dev/null)" = "$pid" ]; then
    rm -f "$ISPN_PIDFILE"
  fi
  if [ "$status" -eq 10 ]; then
    echo "Restarting server..."
    continue
  fi
  exit "$status"
done
