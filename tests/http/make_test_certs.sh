#!/bin/bash
# Makes the certificates of the TLS front's tests (tests/http/tls_front_test.cc) in DIR,
# with openssl, EC P-256 keys (mode 0600):
#   ca.pem            the test CA, which signs:
#   server.pem        the front's certificate for 127.0.0.1 (CN "snowflaked one")
#   server2.pem       its replacement for rotation (CN "snowflaked two")
#   client.pem        a client certificate (CN "taker-a")
#   client2.pem       another (CN "taker-c"), for limits per certificate
#   expired-client.pem  a client certificate valid from 10 to 9 days ago
#   expired.pem       a server certificate valid from 10 to 9 days ago
#   future.pem        a server certificate valid from 9 days from now
#   wrong-name.pem    a server certificate for another host (elsewhere.example, 127.0.0.9)
#   other-ca.pem      an unrelated CA, which signs:
#   other-client.pem  a client certificate the test CA did not sign
#   rogue.pem         a server certificate for 127.0.0.1 (a man in the middle)
#   slash-client.pem  subject CN "a/O=b" (one attribute), and
#   two-rdn-client.pem  subject CN "a\", O "b": X509_NAME_oneline prints both "/CN=a\/O=b"
#   uri1-client.pem, uri2-client.pem  different subjects, one SAN URI (one workload)
#   crl.pem           the test CA's CRL, revoking client2.pem
#   crl2.pem          its successor, revoking client2.pem and uri1-client.pem
#   crl-expired.pem   a CRL of the test CA whose nextUpdate passed 9 days ago
# Each X.pem has its key in X-key.pem. Past and future validity come from running openssl
# with libfaketime preloaded. Not through the faketime wrapper: it names a semaphore and a
# shared-memory file in /dev/shm after its pid, leaves them behind when killed, and then
# fails ("sem_open: File exists") once a later wrapper gets the same pid.
# Usage: make_test_certs.sh DIR
set -euo pipefail
dir=$1
cd "$dir"
umask 077

libfaketime=$(compgen -G '/usr/lib/*/faketime/libfaketime.so.1' | head -n 1) || true
if [[ -z $libfaketime ]]; then
  echo "make_test_certs.sh: libfaketime.so.1 not found under /usr/lib/*/faketime/:" \
       "install package faketime (scripts/setup does)" >&2
  exit 1
fi

# Runs "$@", quiet; on failure shows what it printed and stops the script.
quiet() {
  local out
  if ! out=$("$@" 2>&1); then
    echo "make_test_certs.sh: failed: $*" >&2
    echo "$out" >&2
    exit 1
  fi
}

key() { quiet openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

ca() {  # name subject
  key "$1-key.pem"
  quiet openssl req -x509 -new -key "$1-key.pem" -out "$1.pem" -days 3 -subj "/CN=$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}

printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
printf 'subjectAltName=DNS:elsewhere.example,IP:127.0.0.9\nextendedKeyUsage=serverAuth\n' > wrong-name.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
printf 'subjectAltName=URI:spiffe://snowflake.test/orders\nextendedKeyUsage=clientAuth\n' > uri.ext

leaf() {  # name subject ca ext [faketime offset] [days]; a subject starting "/" is whole
  local name=$1 subject=$2 signer=$3 ext=$4 offset=${5:-} days=${6:-3}
  key "$name-key.pem"
  [[ $subject == /* ]] || subject="/CN=$subject"
  quiet openssl req -new -key "$name-key.pem" -out "$name.csr" -subj "$subject"
  local sign=(openssl x509 -req -in "$name.csr" -CA "$signer.pem" -CAkey "$signer-key.pem"
              -CAcreateserial -out "$name.pem" -days "$days" -extfile "$ext")
  if [[ -n $offset ]]; then quiet env LD_PRELOAD="$libfaketime" FAKETIME="$offset" "${sign[@]}"
  else quiet "${sign[@]}"; fi
}

ca ca "snowflake test CA"
ca other-ca "some other CA"
leaf server "snowflaked one" ca server.ext
leaf server2 "snowflaked two" ca server.ext
leaf client "taker-a" ca client.ext
leaf client2 "taker-c" ca client.ext
leaf expired-client "taker-old" ca client.ext "-10d" 1
leaf expired "snowflaked expired" ca server.ext "-10d" 1
leaf future "snowflaked future" ca server.ext "+9d" 1
leaf wrong-name "snowflaked elsewhere" ca wrong-name.ext
leaf other-client "taker-b" other-ca client.ext
leaf rogue "snowflaked rogue" other-ca server.ext
leaf slash-client '/CN=a\/O=b' ca client.ext
leaf two-rdn-client '/CN=a\\/O=b' ca client.ext
leaf uri1-client "worker-1" ca uri.ext
leaf uri2-client "worker-2" ca uri.ext

# The test CA's CRL: client2.pem revoked (openssl ca keeps its records in cadb/).
mkdir -p cadb
: > cadb/index.txt
echo 1000 > cadb/crlnumber
printf '[ca]\ndefault_ca = test\n[test]\ndatabase = cadb/index.txt\ncrlnumber = cadb/crlnumber\ndefault_md = sha256\ndefault_crl_days = 3\n' > ca.cnf
quiet openssl ca -config ca.cnf -revoke client2.pem -keyfile ca-key.pem -cert ca.pem
quiet openssl ca -config ca.cnf -gencrl -keyfile ca-key.pem -cert ca.pem -out crl.pem
quiet openssl ca -config ca.cnf -revoke uri1-client.pem -keyfile ca-key.pem -cert ca.pem
quiet openssl ca -config ca.cnf -gencrl -keyfile ca-key.pem -cert ca.pem -out crl2.pem
quiet env LD_PRELOAD="$libfaketime" FAKETIME="-10d" openssl ca -config ca.cnf -gencrl \
  -crldays 1 -keyfile ca-key.pem -cert ca.pem -out crl-expired.pem
chmod 600 ./*-key.pem
