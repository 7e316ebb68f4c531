#!/usr/bin/env bash
# How cache creation scales on one Infinispan node of the testbed (docs/benchmark.md, issue 28):
# a node of its own holding HELD permanent caches, then 100 distributed caches created by one
# client and by four, permanent and with `Flags: VOLATILE`, each pair twice (the node holds 800
# more caches by the end). Prints each batch's time. Needs `make testbed-up`; run it alone.
#
#   bench/creation-probe.sh [HELD]     (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
source target/testbed/env
held=${1:-1000}
name=creation-probe offset=2095 jgroups=19095
port=$((11222 + offset))
script=e2e/testbed/infinispan.sh
"$script" stop "$name" --wipe >/dev/null 2>&1 || true
trap '"$script" stop "$name" --wipe >/dev/null 2>&1 || true' EXIT
"$script" start "$name" --offset "$offset" --cluster "$name" --jgroups-port "$jgroups" \
  --peers "127.0.0.1[$jgroups]" --heap 2g >/dev/null
export CREDENTIALS="$INFINISPAN_USER:$INFINISPAN_PASSWORD" CACHES="http://127.0.0.1:$port/rest/v2/caches"
export CONFIG='{"distributed-cache":{"mode":"SYNC"}}'
# create NAME [FLAGS]
create() {
  curl -sf -o /dev/null --digest -u "$CREDENTIALS" -X POST -H 'Content-Type: application/json' \
    ${2:+-H "Flags: $2"} -d "$CONFIG" "$CACHES/$1"
}
export -f create
seconds_since() { echo "$(date +%s.%N) - $1" | bc; }
started=$(date +%s.%N)
seq -f "held-%04g" 1 "$held" | xargs -P1 -I{} bash -c 'create {}'
printf 'held %d: created in %.1f s\n' "$held" "$(seconds_since "$started")"
# batch LABEL CLIENTS [FLAGS]
batch() {
  local started
  started=$(date +%s.%N)
  seq -f "$1-%04g" 1 100 | xargs -P"$2" -I{} bash -c "create {} $3"
  printf '%-14s %d client(s) %6.2f s for 100\n' "$1" "$2" "$(seconds_since "$started")"
}
for round in 1 2; do
  batch "perm-$round-seq" 1 ""
  batch "perm-$round-par" 4 ""
  batch "vol-$round-seq" 1 VOLATILE
  batch "vol-$round-par" 4 VOLATILE
done
