#!/bin/sh
# Entry point (ENTRYPOINT) of the testbed's Infinispan server image, our implementation of the
# contract of the official image quay.io/infinispan/server:16.0.x (see docs/server-image.md):
#
#   launch.sh [SERVER ARGUMENTS...]     e.g. --bind-address=0.0.0.0 --cluster-address=10.0.0.5
#                                       --node-name=demo-0 -Djgroups.dns.query=demo-ping.ns.svc...
#                                       --server-config=/etc/infinispan/config/infinispan.xml
#                                       --logging-config=/etc/infinispan/config/log4j2.xml
#
# Before the server starts (bin/server.sh, which takes every argument):
#   MANAGED_ENV      anything but TRUE (any case): the container is not managed by an operator,
#                    so one admin identity is created from USER and PASS, or generated and printed
#                    when PASS is unset, into $ISPN_HOME/server/conf/{users,groups}.properties.
#                    TRUE: nothing is generated (the operator brings its own realm).
#   IDENTITIES_BATCH a file of `user create NAME -p PASSWORD [-g ROLE,ROLE]` lines, applied to the
#                    same files (the official image runs it through the CLI, which knows more
#                    commands; this image has no CLI and refuses anything else).
#   SERVER_LIBS      space-separated artifacts (group:artifact:version[:classifier], a file path or
#                    a file:// URL, each optionally `|[ALGORITHM|]CHECKSUM`) copied into the server's
#                    lib/ (server/lib, or $SERVER_LIBS_DIR/lib, relative to $ISPN_HOME). Maven
#                    coordinates resolve offline from $ISPN_HOME/artifacts (this image never
#                    downloads; the official one fetches from Maven Central).
#   INIT_CONTAINER   TRUE: stop after the steps above, without starting the server.
#   DEBUG            set: trace this script and show the server's files before starting
#                    (DEBUG=true also starts the JVM with a debug agent, see server.sh).
# Then, unless an argument sets it, --bind-address=0.0.0.0 is added and bin/server.sh replaces
# this shell (heap sizing from RUN_IN_CONTAINER, JAVA_OPTIONS, JAVA_OPTS: see server.sh).
set -eu

if [ -n "${DEBUG:-}" ]; then
  set -x
fi

ISPN_HOME=${ISPN_HOME:-$(cd "$(dirname "$0")/.." && pwd)}
export ISPN_HOME
CONF_DIR=$ISPN_HOME/server/conf

# Files the server creates (data, logs) stay writable by the group: the data volume is shared
# with the pod's fsGroup and the image's directories with group 0.
umask 0002

say() { printf 'launch.sh: %s\n' "$*"; }
fail() { printf 'launch.sh: ERROR: %s\n' "$*" >&2; exit 1; }
upper() { printf '%s' "$1" | tr '[:lower:]' '[:upper:]'; }

banner_line() { printf '# %-76s #\n' "${1:-}"; }
banner_border() { printf '%080d\n' 0 | tr 0 '#'; }

random_token() {
  # 10 alphanumeric characters.
  tr -dc 'A-Za-z0-9' </dev/urandom | head -c 10
}

# Escape a key or value of a Java properties file (\, =, :, #, !, blanks).
prop_escape() {
  printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/[=:#! ]/\\&/g'
}

# A missing or empty FILE becomes a properties file of the realm `default` (clear-text passwords).
ensure_properties() {
  file=$1 kind=$2
  if [ ! -s "$file" ]; then
    # shellcheck disable=SC2016  # the $ signs are the properties realm's header format
    {
      printf '# %s of the realm "default", written by launch.sh.\n' "$kind"
      printf '#$REALM_NAME=default$\n'
      if [ "$kind" = users ]; then printf '#$ALGORITHM=clear$\n'; fi
    } >"$file"
  fi
}

# put_identity NAME PASSWORD ROLES: add or replace one user of the properties realm.
put_identity() {
  name=$(prop_escape "$1") password=$(prop_escape "$2") roles=$3
  users=$CONF_DIR/users.properties groups=$CONF_DIR/groups.properties
  ensure_properties "$users" users
  ensure_properties "$groups" groups
  for f in "$users" "$groups"; do
    # Drop an earlier line of the same user (the key as written, escapes included).
    awk -v key="$name" 'index($0, key "=") != 1' "$f" >"$f.tmp"
    cat "$f.tmp" >"$f"
    rm -f "$f.tmp"
  done
  printf '%s=%s\n' "$name" "$password" >>"$users"
  printf '%s=%s\n' "$name" "$roles" >>"$groups"
  chmod 0660 "$users" 2>/dev/null || true
}

generate_identity() {
  banner_border
  banner_line "IDENTITIES_BATCH not specified"
  if [ -n "${USER:-}" ] && [ -n "${PASS:-}" ]; then
    banner_line "Creating the identity of the USER and PASS environment variables."
  else
    USER=$(random_token)
    PASS=$(random_token)
    banner_line "USER and/or PASS environment variables not specified."
    banner_line "Generated a user and a password (role admin):"
    banner_line
    banner_line "Generated User: $USER"
    banner_line "Generated Password: $PASS"
    banner_line
    banner_line "Give other nodes of the cluster the same credentials, e.g."
    banner_line "    -e USER=$USER -e PASS=$PASS"
  fi
  banner_border
  put_identity "$USER" "$PASS" admin
}

# unquote WORD: WORD without one pair of surrounding double or single quotes.
unquote() {
  case $1 in
    \"*\" | \'*\') [ "${#1}" -ge 2 ] && { printf '%s' "$1" | sed -e 's/^.//' -e 's/.$//'; return; } ;;
  esac
  printf '%s' "$1"
}

# Apply `user create NAME -p|--password PASSWORD [-g|--groups ROLES]` lines (words split on
# blanks; a word may be quoted, but a quoted word cannot contain blanks).
apply_identities_batch() {
  batch=$1
  [ -r "$batch" ] || fail "IDENTITIES_BATCH file $batch cannot be read"
  lineno=0
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    case $line in '' | '#'*) continue ;; esac
    set -f
    # shellcheck disable=SC2086  # words of the batch line, on purpose
    set -- $line
    set +f
    if [ "$#" -lt 3 ] || [ "$1" != user ] || [ "$2" != create ]; then
      fail "IDENTITIES_BATCH $batch line $lineno: only 'user create NAME -p PASSWORD [-g ROLES]' is supported by this image, not: $line"
    fi
    name=$3 password='' roles=''
    shift 3
    while [ "$#" -gt 0 ]; do
      case $1 in
        -p | --password) [ "$#" -ge 2 ] || fail "IDENTITIES_BATCH line $lineno: $1 needs a value"; password=$2; shift ;;
        --password=*) password=${1#*=} ;;
        -g | --groups) [ "$#" -ge 2 ] || fail "IDENTITIES_BATCH line $lineno: $1 needs a value"; roles=$2; shift ;;
        --groups=*) roles=${1#*=} ;;
        *) fail "IDENTITIES_BATCH $batch line $lineno: unsupported option $1" ;;
      esac
      shift
    done
    name=$(unquote "$name") password=$(unquote "$password") roles=$(unquote "$roles")
    [ -n "$password" ] || fail "IDENTITIES_BATCH $batch line $lineno: user $name has no password (-p)"
    put_identity "$name" "$password" "$roles"
    say "identity $name created (roles: ${roles:-none})"
  done <"$batch"
}

# install_artifact SPEC DEST_DIR: one SERVER_LIBS entry.
install_artifact() {
  spec=$1 dest=$2
  location=${spec%%|*} algorithm='' checksum=''
  if [ "$location" != "$spec" ]; then
    rest=${spec#*|}
    case $rest in
      *'|'*) algorithm=${rest%%|*}; checksum=${rest#*|} ;;
      *) algorithm=SHA-256; checksum=$rest ;;
    esac
  fi
  case $location in
    file://*) source=${location#file://} ;;
    http://* | https://* | ftp://*)
      say "$location: this image installs nothing from the network (the official image downloads it)"
      return 1 ;;
    /* | ./* | ../*) source=$location ;;
    *:*:*)
      # group:artifact:version[:classifier] -> artifact-version[-classifier].jar
      old_ifs=$IFS; IFS=:
      # shellcheck disable=SC2086
      set -- $location
      IFS=$old_ifs
      [ "$#" -le 4 ] || { say "$location: not group:artifact:version[:classifier]"; return 1; }
      file=$2-$3${4:+-$4}.jar
      source=$ISPN_HOME/artifacts/$file
      if [ ! -f "$source" ]; then
        bundled=''
        for jar in "$ISPN_HOME"/artifacts/*.jar; do [ -f "$jar" ] && bundled="$bundled ${jar##*/}"; done
        say "$location: $file is not among the artifacts bundled in $ISPN_HOME/artifacts" \
          "(${bundled# }); this image never downloads"
        return 1
      fi ;;
    *) source=$location ;;
  esac
  [ -f "$source" ] || { say "$location: file $source not found"; return 1; }
  if [ -n "$checksum" ]; then
    case $(upper "$algorithm") in
      SHA-256 | SHA256) tool=sha256sum ;;
      SHA-512 | SHA512) tool=sha512sum ;;
      SHA-1 | SHA1) tool=sha1sum ;;
      MD5) tool=md5sum ;;
      *) say "$location: unsupported checksum algorithm $algorithm"; return 1 ;;
    esac
    actual=$($tool "$source" | cut -d' ' -f1)
    if [ "$(upper "$actual")" != "$(upper "$checksum")" ]; then
      say "$location: $algorithm checksum $actual, expected $checksum"
      return 1
    fi
  fi
  case $source in
    *.tar.gz | *.tgz) tar -xzf "$source" -C "$dest" ;;
    *.tar) tar -xf "$source" -C "$dest" ;;
    *.zip) say "$location: zip archives cannot be extracted in this image (no unzip)"; return 1 ;;
    *) cp -f "$source" "$dest/" ;;
  esac
  say "installed $location into $dest"
}

install_server_libs() {
  root=${SERVER_LIBS_DIR:-server}
  case $root in /*) ;; *) root=$ISPN_HOME/$root ;; esac
  dest=$root/lib
  mkdir -p "$dest"
  set -f
  # shellcheck disable=SC2086  # space-separated list, on purpose
  set -- $SERVER_LIBS
  set +f
  for artifact in "$@"; do
    install_artifact "$artifact" "$dest" || return 1
  done
}

show_server_files() {
  set +x
  printf '%s\n' "--- files under $ISPN_HOME (lib/ and artifacts/ left out)"
  find "$ISPN_HOME" \( -path "$ISPN_HOME/lib" -o -path "$ISPN_HOME/artifacts" \) -prune -o -print | sort
  for f in "$ISPN_HOME"/server/data/*.state "$ISPN_HOME"/server/conf/*.xml; do
    [ -f "$f" ] || continue
    printf '%s\n' "--- $f"
    cat "$f"
  done
  set -x
}

# ---------------------------------------------------------------------------------------------

if [ "$(upper "${MANAGED_ENV:-}")" != TRUE ] && [ -z "${IDENTITIES_BATCH:-}" ]; then
  generate_identity
fi

if [ -n "${IDENTITIES_BATCH:-}" ]; then
  apply_identities_batch "$IDENTITIES_BATCH"
fi

if [ -n "${SERVER_LIBS:-}" ]; then
  install_server_libs || fail "Server libraries installation failed. Aborting server start."
fi

if [ "$(upper "${INIT_CONTAINER:-}")" = TRUE ]; then
  exit 0
fi

if [ -n "${DEBUG:-}" ]; then
  show_server_files
fi

bind_given=false
for arg in "$@"; do
  case $arg in
    -b | --bind-address | --bind-address=*) bind_given=true ;;
  esac
done
if [ "$bind_given" = false ]; then
  set -- --bind-address=0.0.0.0 "$@"
fi

exec "$ISPN_HOME/bin/server.sh" "$@"
