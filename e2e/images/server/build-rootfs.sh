#!/usr/bin/env bash
# Builds, without Docker, the root filesystem of the testbed's Infinispan server image: Debian
# bookworm (debootstrap, minbase) with its Java 17 runtime, and the Infinispan server that
# `e2e/testbed/build.sh infinispan` assembled from Maven Central, laid out like the official image
# quay.io/infinispan/server:16.0.x (entry point contract: docs/server-image.md).
#
#   build-rootfs.sh [--force]      prints the output directory on stdout when done
#
# Output, cached by version: $PROJECT_CACHE/server-image-<infinispan version>-bookworm/
#   rootfs/      the root filesystem (owners and modes as the image needs them: run as root)
#   image.env    the image configuration (user, workdir, entrypoint, env...), shell variables
#   build.log    debootstrap and apt output
#   .complete    written last; holds the fingerprint of the inputs
# Two stages, each redone only when its inputs change: the Debian base (debootstrap, security
# updates, stripping: minutes, needs deb.debian.org) and the server layout (seconds: jars, scripts,
# configuration, users). --force redoes both.
# Environment: DEBIAN_MIRROR (http://deb.debian.org/debian), DEBIAN_SECURITY_MIRROR
# (http://deb.debian.org/debian-security), SECURITY_UPDATES (1: apply bookworm-updates and
# bookworm-security; 0: the release as debootstrap installs it).
set -euo pipefail
IMAGE_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../testbed/lib.sh
source "$IMAGE_SRC/../../testbed/lib.sh"

SUITE=bookworm
JAVA_PACKAGE=openjdk-17-jre-headless
JVM_DIR=java-17-openjdk-amd64
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
SECURITY_UPDATES="${SECURITY_UPDATES:-1}"
# The image's users: 65532 is the official 16.x image's USER; 185 the 15.x images' one (kept so
# a pod that sets runAsUser: 185 works the same). Both have group 0 as primary group, which owns
# the server's writable directories (the OpenShift arbitrary-UID convention).
IMAGE_UID=65532
LEGACY_UID=185
WORKDIR=/opt/infinispan

force=0
case ${1:-} in
  --force) force=1 ;;
  '') ;;
  *) die "usage: build-rootfs.sh [--force]" ;;
esac

[[ $(id -u) == 0 ]] || die "build-rootfs.sh needs root (debootstrap, chroot, file owners)"
for tool in debootstrap chroot sha256sum jq; do
  command -v "$tool" >/dev/null || die "$tool is missing (apt-get install debootstrap)"
done
ISPN_DIST=$(infinispan_home) ||
  die "the Infinispan server is not built: run 'e2e/testbed/build.sh infinispan' first (it assembles it from Maven Central into $PROJECT_CACHE/infinispan-<version>)"
VERSION=$(cat "$ISPN_DIST/VERSION")
ls "$ISPN_DIST/lib/infinispan-server-runtime-$VERSION.jar" >/dev/null 2>&1 ||
  die "$ISPN_DIST/lib has no infinispan-server-runtime-$VERSION.jar: run 'e2e/testbed/build.sh infinispan' again"
major=${VERSION%%.*} minor=${VERSION#*.}; minor=${minor%%.*}
if ((major > 16 || (major == 16 && minor >= 1))); then
  die "Infinispan $VERSION needs Java 25; this image has Debian $SUITE's Java 17 (16.0.x only)"
fi

OUT="$PROJECT_CACHE/server-image-$VERSION-$SUITE"
ROOTFS="$OUT/rootfs"
LOG="$OUT/build.log"
mkdir -p "$OUT"

# Fingerprints: a stage is redone when the code that builds it or its inputs change.
base_fingerprint() {
  { declare -f build_base strip_base; echo "$SUITE $JAVA_PACKAGE $DEBIAN_MIRROR $SECURITY_UPDATES"; } | sha256sum | cut -d' ' -f1
}
server_fingerprint() {
  {
    base_fingerprint
    declare -f install_server write_image_env write_conf
    cat "$IMAGE_SRC/launch.sh" "$IMAGE_SRC/server.sh"
    echo "$VERSION"
    (cd "$ISPN_DIST" && find lib server-lib -type f -printf '%p %s %T@\n' | sort)
  } | sha256sum | cut -d' ' -f1
}

# Unmount whatever is still mounted under the root filesystem being built (a failed run).
unmount_all() {
  local dir=$1 m
  awk -v d="$dir" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
}

# run_logged WHAT COMMAND...: COMMAND's output goes to build.log; a heartbeat every 30 s.
run_logged() {
  local what=$1 started=$SECONDS pid rc ticks=0
  shift
  printf '\n=== %s: %s\n' "$what" "$*" >>"$LOG"
  "$@" >>"$LOG" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((++ticks % 30 == 0)); then
      log "  ... $what: $((SECONDS - started))s so far; last log line: $(tail -n 1 "$LOG" | cut -c1-100)"
    fi
  done
  rc=0
  wait "$pid" || rc=$?
  if ((rc != 0)); then
    log "$what FAILED (exit $rc)"
    tail_log "$LOG"
    return "$rc"
  fi
}

# Stage 1: Debian bookworm minbase + the Java 17 runtime, updated, stripped.
build_base() {
  local dir=$1
  run_logged debootstrap debootstrap --variant=minbase --include="$JAVA_PACKAGE" \
    --components=main "$SUITE" "$dir" "$DEBIAN_MIRROR"
  cat >"$dir/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR $SUITE main
deb $DEBIAN_MIRROR $SUITE-updates main
deb $DEBIAN_SECURITY_MIRROR $SUITE-security main
EOF
  # No daemon may start in the chroot; Java (ca-certificates-java) needs /proc.
  printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
  chmod 0755 "$dir/usr/sbin/policy-rc.d"
  mount -t proc proc "$dir/proc"
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  if [[ $SECURITY_UPDATES == 1 ]]; then
    log "applying $SUITE-updates and $SUITE-security"
    run_logged "apt-get upgrade" chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      DEBIAN_FRONTEND=noninteractive sh -c 'apt-get -q update && apt-get -q -y -o Dpkg::Options::=--force-confold dist-upgrade'
  fi
  # The default Java of the image, where the official image has it too.
  ln -sfn "$JVM_DIR" "$dir/usr/lib/jvm/default-java"
  run_logged "java -version" chroot "$dir" /usr/lib/jvm/default-java/bin/java -version
  umount "$dir/proc"
  rm -f "$dir/usr/sbin/policy-rc.d"
  strip_base "$dir"
}

strip_base() {
  local dir=$1
  log "stripping apt lists and caches, docs (copyright files kept), man pages, locales, logs"
  (
    cd "$dir"
    rm -rf var/lib/apt/lists/* var/cache/apt/* var/cache/debconf/*-old var/lib/dpkg/*-old \
      var/log/* usr/share/man/* usr/share/info/* usr/share/lintian usr/share/linda \
      usr/share/locale/* usr/share/i18n/locales var/cache/ldconfig/aux-cache
    find usr/share/doc -mindepth 1 -not -type d -not -name copyright -delete
    find usr/share/doc -mindepth 1 -type d -empty -delete
    # The Java runtime: javac's symbol file, the CDS archive of uncompressed oops (heaps over
    # 32 GB only) and man pages are never used by the server.
    rm -rf usr/lib/jvm/"$JVM_DIR"/lib/ct.sym usr/lib/jvm/"$JVM_DIR"/lib/server/classes_nocoops.jsa \
      usr/lib/jvm/"$JVM_DIR"/man
    # Runtime files: the container runtime provides /dev, /proc, /sys, resolv.conf, hosts, hostname.
    rm -rf dev/* proc/* sys/* run/* tmp/* var/tmp/* root/.bash_history
    rm -f etc/hostname etc/machine-id var/lib/dbus/machine-id etc/ssh/ssh_host_*
    rm -f etc/resolv.conf
    : >etc/resolv.conf
    chmod 0644 etc/resolv.conf
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >etc/hosts
    chmod 1777 tmp var/tmp
    # Keep apt from downloading docs and translations again.
    printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/locale/*\npath-exclude /usr/share/info/*\n' \
      >etc/dpkg/dpkg.cfg.d/excludes
    printf 'Acquire::Languages "none";\n' >etc/apt/apt.conf.d/90-no-translations
  )
}

# The configuration the server runs with when no --server-config/--logging-config is given.
write_conf() {
  local conf=$1
  cat >"$conf/infinispan.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<!-- Default configuration of the testbed's Infinispan server image (used when no server-config
     argument is given):
     one endpoint (Hot Rod, REST, RESP, Memcached) on port 11222 of the bind address (launch.sh
     passes 0.0.0.0 unless told otherwise), the properties realm "default" of users.properties and
     groups.properties in this directory (launch.sh writes an admin identity into them unless
     MANAGED_ENV=TRUE), authorization on, clustering over the JGroups stack
     ${infinispan.cluster.stack} (tcp: MPING discovery; kubernetes: DNS_PING with
     -Djgroups.dns.query=...). -->
<infinispan
    xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
    xmlns="urn:infinispan:config:16.0"
    xmlns:server="urn:infinispan:server:16.0">

  <cache-container name="default" statistics="true">
    <transport cluster="${infinispan.cluster.name:cluster}" stack="${infinispan.cluster.stack:tcp}"
               node-name="${infinispan.node.name:}"/>
    <security>
      <authorization/>
    </security>
  </cache-container>

  <server xmlns="urn:infinispan:server:16.0">
    <interfaces>
      <interface name="public">
        <inet-address value="${infinispan.bind.address:127.0.0.1}"/>
      </interface>
    </interfaces>

    <socket-bindings default-interface="public" port-offset="${infinispan.socket.binding.port-offset:0}">
      <socket-binding name="default" port="${infinispan.bind.port:11222}"/>
    </socket-bindings>

    <security>
      <security-realms>
        <security-realm name="default">
          <properties-realm groups-attribute="Roles">
            <user-properties path="users.properties"/>
            <group-properties path="groups.properties"/>
          </properties-realm>
        </security-realm>
      </security-realms>
    </security>

    <endpoints socket-binding="default" security-realm="default"/>
  </server>
</infinispan>
EOF
  cat >"$conf/log4j2.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<!-- Default logging of the testbed's Infinispan server image (used when no logging-config argument
     is given):
     INFO on the console, and the same in ${sys:infinispan.server.log.path}/server.log (rolled at
     start, daily and at 100 MB) when that directory is writable. -->
<Configuration name="InfinispanServerConfig" monitorInterval="60" shutdownHook="disable">
  <Properties>
    <Property name="logDir">${sys:infinispan.server.log.path}</Property>
  </Properties>
  <Appenders>
    <Console name="STDOUT">
      <PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p (%t) [%c] %m%throwable%n"/>
    </Console>
    <RollingFile name="FILE" createOnDemand="true" ignoreExceptions="true"
                 fileName="${logDir}/server.log" filePattern="${logDir}/server.log.%d{yyyy-MM-dd}-%i">
      <PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p (%t) [%c] %m%throwable%n"/>
      <Policies>
        <OnStartupTriggeringPolicy/>
        <TimeBasedTriggeringPolicy/>
        <SizeBasedTriggeringPolicy size="100 MB"/>
      </Policies>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Root level="INFO">
      <AppenderRef ref="STDOUT"/>
      <AppenderRef ref="FILE"/>
    </Root>
    <Logger name="com.arjuna" level="WARN"/>
    <Logger name="org.jboss.threads" level="WARN"/>
    <Logger name="io.netty.handler.ssl.ApplicationProtocolNegotiationHandler" level="ERROR"/>
    <Logger name="org.infinispan.AUDIT" level="ERROR"/>
  </Loggers>
</Configuration>
EOF
  # shellcheck disable=SC2016  # the $ signs are the properties realm's header format
  printf '# Users of the realm "default": NAME=PASSWORD (launch.sh adds one unless MANAGED_ENV=TRUE).\n#$REALM_NAME=default$\n#$ALGORITHM=clear$\n' \
    >"$conf/users.properties"
  # shellcheck disable=SC2016
  printf '# Roles of the users of the realm "default": NAME=ROLE,ROLE\n#$REALM_NAME=default$\n' \
    >"$conf/groups.properties"
}

# Stage 2: users, /opt/infinispan, the server's jars, our scripts and default configuration.
install_server() {
  local root=$1 home=$1$WORKDIR
  log "users: infinispan ($IMAGE_UID) and jboss ($LEGACY_UID), primary group 0, home $WORKDIR"
  local f
  for f in passwd group shadow gshadow; do
    [[ -f $root/etc/$f ]] && sed -i -e '/^infinispan:/d' -e '/^jboss:/d' "$root/etc/$f"
  done
  printf 'infinispan:x:%s:0:Infinispan server:%s:/usr/sbin/nologin\n' "$IMAGE_UID" "$WORKDIR" >>"$root/etc/passwd"
  printf 'jboss:x:%s:0:Infinispan server (UID of the 15.x images):%s:/usr/sbin/nologin\n' "$LEGACY_UID" "$WORKDIR" >>"$root/etc/passwd"
  printf 'infinispan:x:%s:\njboss:x:%s:\n' "$IMAGE_UID" "$LEGACY_UID" >>"$root/etc/group"
  if [[ -f $root/etc/shadow ]]; then printf 'infinispan:!*:19000::::::\njboss:!*:19000::::::\n' >>"$root/etc/shadow"; fi
  if [[ -f $root/etc/gshadow ]]; then printf 'infinispan:!::\njboss:!::\n' >>"$root/etc/gshadow"; fi

  log "laying out $WORKDIR from $ISPN_DIST (Infinispan $VERSION)"
  rm -rf "$home"
  # Writable by the server (its user, or any UID of group 0): the home, the server root and its
  # conf/ data/ lib/ log/. Read-only for it: bin/, lib/ (the distribution) and artifacts/.
  install -d -o "$IMAGE_UID" -g 0 -m 0775 "$home" "$home/server" "$home/server/conf" \
    "$home/server/data" "$home/server/lib" "$home/server/log"
  install -d -o 0 -g 0 -m 0755 "$home/bin" "$home/lib" "$home/artifacts"
  install -o 0 -g 0 -m 0755 "$IMAGE_SRC/launch.sh" "$IMAGE_SRC/server.sh" "$home/bin/"
  printf 'ServerJMXConfig {\n    org.infinispan.server.loader.ServerLoginModule REQUIRED;\n};\n' >"$home/bin/server-jaas.config"
  chmod 0644 "$home/bin/server-jaas.config"
  install -o 0 -g 0 -m 0644 "$ISPN_DIST"/lib/*.jar "$home/lib/"
  # Not on the server's class path: SERVER_LIBS=group:artifact:version copies them into server/lib
  # (nashorn-core and the asm jars it needs: JavaScript server tasks).
  install -o 0 -g 0 -m 0644 "$ISPN_DIST"/server-lib/*.jar "$home/artifacts/"
  write_conf "$home/server/conf"
  printf 'Jars placed here are on the class path of the server (SERVER_LIBS installs here).\n' >"$home/server/lib/README.txt"
  chown "$IMAGE_UID:0" "$home"/server/conf/* "$home/server/lib/README.txt"
  chmod 0664 "$home"/server/conf/* "$home/server/lib/README.txt"
  chmod 0660 "$home/server/conf/users.properties"
  printf '%s\n' "$VERSION" >"$home/VERSION"
}

# sq VALUE: VALUE as one single-quoted shell word.
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

write_image_env() {
  local file=$1 env_list
  env_list=(
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    "HOME=$WORKDIR"
    "ISPN_HOME=$WORKDIR"
    "USER=infinispan"
    "JAVA_HOME=/usr/lib/jvm/default-java"
    "LANG=C.UTF-8"
  )
  local env_json ports_json labels_json
  env_json=$(printf '%s\n' "${env_list[@]}" | jq -R . | jq -cs .)
  ports_json=$(printf '%s\n' 11222 11221 11223 2157 46655 57800 7800 7900 8080 8443 | jq -R '{(. + "/tcp"): {}}' | jq -cs add)
  labels_json=$(jq -cn --arg v "$VERSION" --arg suite "$SUITE" '{
    "name": "infinispan", "version": $v,
    "org.opencontainers.image.title": "Infinispan Server (testbed)",
    "org.opencontainers.image.version": $v,
    "org.opencontainers.image.description": ("Infinispan server " + $v + " on Debian " + $suite + " with its Java 17 runtime, built by e2e/images/server/build-rootfs.sh"),
    "org.opencontainers.image.source": "https://github.com/infinispan/infinispan"}')
  {
    echo "# Image configuration of the rootfs next to this file, written by e2e/images/server/build-rootfs.sh."
    echo "# Sourced by bash. IMAGE_ENV holds one NAME=VALUE per line; the *_JSON variables are the OCI config's forms."
    echo "IMAGE_VERSION=$(sq "$VERSION")"
    echo "IMAGE_ROOTFS=$(sq "$ROOTFS")"
    echo "IMAGE_OS=linux"
    echo "IMAGE_ARCH=amd64"
    echo "IMAGE_USER=$(sq "$IMAGE_UID")"
    echo "IMAGE_WORKDIR=$(sq "$WORKDIR")"
    echo "IMAGE_ENTRYPOINT=$(sq "[\"$WORKDIR/bin/launch.sh\"]")"
    echo "IMAGE_CMD=$(sq '[]')"
    echo "IMAGE_STOP_SIGNAL=SIGTERM"
    echo "IMAGE_ENV=$(sq "$(printf '%s\n' "${env_list[@]}")")"
    echo "IMAGE_ENV_JSON=$(sq "$env_json")"
    echo "IMAGE_EXPOSED_PORTS_JSON=$(sq "$ports_json")"
    echo "IMAGE_LABELS_JSON=$(sq "$labels_json")"
  } >"$file"
}

# --------------------------------------------------------------------------------------------
started=$SECONDS
want_base=$(base_fingerprint)
want_server=$(server_fingerprint)
if ((!force)) && [[ -f $OUT/.complete && $(cat "$OUT/.complete") == "$want_server" && -d $ROOTFS ]]; then
  log "server image rootfs (Infinispan $VERSION, Debian $SUITE): cached in $OUT"
  echo "$OUT"
  exit 0
fi
rm -f "$OUT/.complete"
: >"$LOG"

if ((force)) || [[ ! -f $OUT/.base-complete || $(cat "$OUT/.base-complete") != "$want_base" || ! -d $ROOTFS ]]; then
  tmp="$OUT/rootfs.tmp"
  unmount_all "$tmp"
  rm -rf "$tmp" "$ROOTFS" "$OUT/.base-complete"
  log "building the Debian $SUITE base with $JAVA_PACKAGE into $tmp (debootstrap from $DEBIAN_MIRROR; log: $LOG)"
  trap 'unmount_all "$tmp"' EXIT
  build_base "$tmp"
  trap - EXIT
  mv "$tmp" "$ROOTFS"
  echo "$want_base" >"$OUT/.base-complete"
  log "Debian base done in $((SECONDS - started))s ($(du -sh "$ROOTFS" | cut -f1))"
else
  log "Debian $SUITE base with $JAVA_PACKAGE: cached in $ROOTFS"
fi

install_server "$ROOTFS"
write_image_env "$OUT/image.env"
java_version=$(sed -n 's/^JAVA_VERSION="\(.*\)"/\1/p' "$ROOTFS/usr/lib/jvm/default-java/release" 2>/dev/null || true)
echo "$want_server" >"$OUT/.complete"
log "server image rootfs ready in $((SECONDS - started))s: $ROOTFS ($(du -sh "$ROOTFS" | cut -f1); Java ${java_version:-?}, Infinispan $VERSION); config: $OUT/image.env"
echo "$OUT"
