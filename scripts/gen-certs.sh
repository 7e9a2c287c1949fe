#!/usr/bin/env bash
# Generates a development CA and a server certificate signed by it, both
# ECDSA P-256 (a TLS handshake with it costs the server far less CPU than
# with RSA-2048), for local testing of pgharbor and PostgreSQL.
#
# Usage: scripts/gen-certs.sh DIR [EXTRA_DNS_NAME...]
#
# Writes DIR/ca.crt, DIR/ca.key, DIR/server.crt, DIR/server.key (keys 0600).
# The server certificate names localhost, 127.0.0.1, ::1, this host's name and
# any extra names given. Point tls.cert_file/tls.key_file at server.crt/key,
# and clients (sslrootcert=) at ca.crt for verify-ca / verify-full.
# Never commit the keys; tests generate their own at run time.
set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
dir=$1
shift
command -v openssl >/dev/null || { echo "gen-certs.sh: openssl is required (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077

san="DNS:localhost,IP:127.0.0.1,IP:::1,DNS:$(hostname)"
for name in "$@"; do san+=",DNS:$name"; done

openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 3650 \
    -subj "/CN=pgharbor development CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/server.key" -out "$dir/server.csr" \
    -subj "/CN=localhost" 2>/dev/null
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -out "$dir/server.crt" -days 825 \
    -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' "$san") 2>/dev/null
rm -f "$dir/server.csr" "$dir/ca.srl"
chmod 600 "$dir/ca.key" "$dir/server.key"
chmod 644 "$dir/ca.crt" "$dir/server.crt"
echo "wrote $dir/{ca.crt,ca.key,server.crt,server.key} (server names: $san)"
