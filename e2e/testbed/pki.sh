#!/usr/bin/env bash
# PKI for the testbed control plane, made with openssl:
#   ca.{crt,key}                 the cluster CA (signs serving and client certs)
#   apiserver.{crt,key}          kube-apiserver serving cert (localhost, 127.0.0.1, the node's address,
#                                the `kubernetes` Service's IP, kubernetes.default.svc...)
#   sa.{key,pub}                 service-account token signing key pair
#   <user>.{crt,key}             client certs, see issue_client_cert
# Sourced by up.sh; issue_client_cert is also used by tests to give an operator its own identity.
set -euo pipefail

pki_init() {
  local dir=$1
  mkdir -p "$dir"
  if [[ -f $dir/apiserver.crt ]] && ! openssl x509 -in "$dir/apiserver.crt" -noout -ext subjectAltName 2>/dev/null | grep -q "IP Address:$NODE_IP\b"; then
    # Made before the node existed: the pods reach the API server at the node's address.
    rm -f "$dir/apiserver.crt"
  fi
  [[ -f $dir/ca.crt && -f $dir/apiserver.crt && -f $dir/sa.key ]] && return 0
  (
    cd "$dir"
    if [[ ! -f ca.crt ]]; then
      openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout ca.key -out ca.crt \
        -subj "/CN=infinispan-operators-testbed-ca" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    fi
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    cat >apiserver.ext <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:${SERVICE_CIDR%.*/*}.1,IP:$NODE_IP
EXT
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    if [[ ! -f sa.key ]]; then
      openssl genrsa -out sa.key 2048 2>/dev/null
      openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    fi
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

# server_tls_pki DIR: the PKI of a TLS Infinispan node for tests, made in DIR (created):
#   ca.pem (+ ca.key)   a test CA
#   server.pem          unencrypted PKCS#8 key + certificate for IP 127.0.0.1 and DNS localhost,
#                       signed by ca.pem: the keystore infinispan/infinispan-tls.xml reads (give it
#                       to `infinispan.sh start` with --conf-file DIR/server.pem --ca DIR/ca.pem)
#   other-ca.pem        an unrelated CA (trusting only it must fail)
# Valid for 2 days; nothing of it is committed. Used by infinispan-rest/tests/tls.rs and
# e2e/tests/server_tls.rs.
server_tls_pki() {
  local dir=$1 pair
  mkdir -p "$dir"
  (
    cd "$dir"
    for pair in ca:it-tls-ca other-ca:it-tls-other-ca; do
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout "${pair%%:*}.key" -out "${pair%%:*}.pem" \
        -subj "/CN=${pair#*:}" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    done
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost"
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile server.ext -out server.crt
    cat server.key server.crt >server.pem
    rm -f server.csr server.ext ca.srl
  )
}
