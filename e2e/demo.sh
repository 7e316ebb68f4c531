#!/usr/bin/env bash
# `make demo`: brings up the testbed (building it on first use), installs the project's CRDs and
# the cluster-label admission policy on the real API server, and shows what a user can do now.
# The operators themselves join the demo as their issues land.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

say "The testbed is up (make testbed-up). Loading its environment from target/testbed/env"
# shellcheck disable=SC1091
source target/testbed/env

say "Installing the eight CRDs of infinispan.org (generated from the Rust types by 'cluster-operator crd')"
kubectl apply --server-side --field-manager=infinispan-operators-demo -f helm/infinispan-operator/crds/infinispan.org.yaml
# shellcheck disable=SC2046
kubectl wait --for condition=Established --timeout=60s $(kubectl get crd -o name | grep 'infinispan\.org$')

say "Installing the admission policy that keeps the infinispan.org/cluster label immutable (design N3)"
kubectl apply --server-side --field-manager=infinispan-operators-demo -f helm/infinispan-operator/files/label-policy.yaml

say "The API as kubectl sees it"
kubectl api-resources --api-group=infinispan.org

say "A Cache CR, as a user writes it"
kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
cat <<'YAML' | tee /dev/stderr | kubectl apply -n demo -f -
apiVersion: infinispan.org/v2alpha1
kind: Cache
metadata:
  name: orders
  labels:
    infinispan.org/cluster: demo
spec:
  template: |
    distributedCache:
      mode: SYNC
      encoding:
        mediaType: application/x-protostream
YAML
kubectl get caches -n demo

say "The API server refuses an invalid Counter (bounds out of order) with a clear message"
cat <<'YAML' | kubectl apply -n demo -f - || true
apiVersion: infinispan.org/v2alpha1
kind: Counter
metadata:
  name: broken
  labels:
    infinispan.org/cluster: demo
spec:
  lowerBound: 10
  upperBound: 5
YAML

say "The Infinispan server answers at $INFINISPAN_URL (user $INFINISPAN_USER, password in target/testbed/env)"
curl -s -u "$INFINISPAN_USER:$INFINISPAN_PASSWORD" "$INFINISPAN_URL/rest/v2/server"; echo

cat <<EOF2

Everything is still running. Try:
  source target/testbed/env
  kubectl get infinispan -A            # every kind of the project (category 'infinispan')
  kubectl explain cache.spec
  curl -u "\$INFINISPAN_USER:\$INFINISPAN_PASSWORD" "\$INFINISPAN_URL/rest/v2/caches"
Not there yet: the operators that sync these CRs with the server (see the open issues).
Stop it with: make testbed-down   (or make testbed-wipe to also delete its state)
EOF2
