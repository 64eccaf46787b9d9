#!/usr/bin/env bash
# A throwaway PKI for TLS tests (scripts/zk.sh start --tls), made with the openssl command.
#   scripts/tls_certs.sh DIR     makes DIR (mode 700) with, all PEM, EC P-256 keys (mode 600):
#     ca.pem ca.key                  the test CA
#     server.pem server.key          CN=localhost, SAN DNS:localhost, IP:127.0.0.1 (30 days)
#     wrongname.pem wrongname.key    a server certificate for DNS:wrong.example only
#     expired.pem expired.key        as server.pem, but valid only from 2020-01-01 to 2021-01-01
#     client.pem client.key          CN=zklock-client (SAN DNS:localhost, IP:127.0.0.1), whose
#                                    x509 identity on the servers is "CN=zklock-client"
#     client-enc.key                 client.key encrypted with the password "secret" (PKCS#8,
#                                    PBES2/AES-256: ZooKeeper 3.8's Java PEM reader cannot decrypt it)
#     other.pem other.key            CN=zklock-other, signed by the same CA
#     stranger-ca.pem stranger-ca.key  another CA, which the servers do not trust
#     stranger.pem stranger.key      CN=zklock-stranger, signed by stranger-ca
#     NAME-keystore.pem              NAME.key and NAME.pem in one file, for each certificate above
#                                    but the CAs (mode 600): ZooKeeper's PEM key store reads the
#                                    key and the certificate from one file (zookeeper.ssl.keyStore.location)
# Every leaf certificate allows both serverAuth and clientAuth. Does nothing if DIR/ca.pem exists
# (ca.pem is moved in last, so a run that died half-way leaves no ca.pem).
set -euo pipefail
dir=${1:?usage: tls_certs.sh DIR}
[ -f "$dir/ca.pem" ] && exit 0
command -v openssl >/dev/null || { echo "tls_certs.sh: openssl not found: run scripts/setup.sh" >&2; exit 1; }
umask 077
mkdir -p "$dir"; chmod 700 "$dir"
dir=$(cd "$dir" && pwd)
new=$(mktemp -d "$dir/.new.XXXXXX")
trap 'rm -rf "$new"' EXIT
cd "$new"

run() { # run COMMAND...: openssl is chatty on stderr; show what it said only if it fails
  local out
  out=$("$@" 2>&1) || { echo "tls_certs.sh: $* failed:"$'\n'"$out" >&2; exit 1; }
}
key() { run openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
ca() { # ca NAME CN : a self-signed CA certificate
  key "$1.key"
  run openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 30 -subj "/CN=$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
# sign NAME CN SAN CA [STARTDATE ENDDATE]: a leaf certificate signed by CA, with `openssl ca`,
# which alone (in OpenSSL 3.0) can set a validity that ended in the past
sign() {
  local name=$1 cn=$2 san=$3 ca=$4 start=${5:-} end=${6:-}
  key "$name.key"
  run openssl req -new -key "$name.key" -out "$name.csr" -subj "/CN=$cn"
  rm -rf db; mkdir db; : >db/index.txt
  cat >db/ca.cnf <<EOF
[ ca ]
default_ca = this
[ this ]
database = db/index.txt
new_certs_dir = db
rand_serial = yes
certificate = $ca.pem
private_key = $ca.key
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[ any ]
commonName = supplied
[ leaf ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
  local dates=(-days 30)
  [ -z "$start" ] || dates=(-startdate "$start" -enddate "$end")
  run openssl ca -batch -config db/ca.cnf -extensions leaf -notext "${dates[@]}" -in "$name.csr" -out "$name.pem"
  rm -rf db "$name.csr"
  cat "$name.key" "$name.pem" >"$name-keystore.pem"
}

loopback="DNS:localhost,IP:127.0.0.1"
ca ca "zklock test CA"
ca stranger-ca "zklock stranger CA"
sign server localhost "$loopback" ca
sign wrongname wrong.example "DNS:wrong.example" ca
sign expired localhost "$loopback" ca 20200101000000Z 20210101000000Z
sign client zklock-client "$loopback" ca
sign other zklock-other "$loopback" ca
sign stranger zklock-stranger "$loopback" stranger-ca
run openssl pkey -in client.key -aes256 -passout pass:secret -out client-enc.key
chmod 600 ./*.key ./*-keystore.pem
chmod 644 ca.pem stranger-ca.pem server.pem wrongname.pem expired.pem client.pem other.pem stranger.pem
for f in *; do [ "$f" = ca.pem ] || mv -f "$f" "$dir/"; done
mv -f ca.pem "$dir/"
