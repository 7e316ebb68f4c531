#!/usr/bin/env bash
# PKI for the testbed control plane, made with openssl:
#   ca.{crt,key}                 the cluster CA (signs serving and client certs)
#   apiserver.{crt,key}          kube-apiserver serving cert (localhost, 127.0.0.1, kubernetes.default.svc...)
#   sa.{key,pub}                 service-account token signing key pair
#   <user>.{crt,key}             client certs, see issue_client_cert
# Sourced by up.sh; issue_client_cert is also used by tests to give an operator its own identity.
set -euo pipefail

pki_init() {
  local dir=$1
  mkdir -p "$dir"
  [[ -f $dir/ca.crt && -f $dir/apiserver.crt && -f $dir/sa.key ]] && return 0
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout ca.key -out ca.crt \
      -subj "/CN=infinispan-operators-testbed-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    cat >apiserver.ext <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:${SERVICE_CIDR%.*/*}.1
EXT
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext
  )
}

# issue_client_cert DIR NAME CN [ORG...]: a client cert NAME.{crt,key} for user CN in groups ORG.
issue_client_cert() {
  local dir=$1 name=$2 cn=$3; shift 3
  local subj="/CN=$cn" org
  for org in "$@"; do subj+="/O=$org"; done
  [[ -f $dir/$name.crt ]] && return 0
  (
    cd "$dir"
    openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$name.ext"
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    rm -f "$name.csr" "$name.ext"
  )
}

# write_kubeconfig FILE SERVER_URL PKI_DIR CERT_NAME: a kubeconfig with everything embedded.
write_kubeconfig() {
  local file=$1 server=$2 dir=$3 name=$4
  cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$dir/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$dir/$name.crt")
    client-key-data: $(base64 -w0 <"$dir/$name.key")
contexts:
- name: testbed
  context:
    cluster: testbed
    user: $name
    namespace: default
current-context: testbed
KC
  chmod 600 "$file"
}
