"""The TLS login cells of issue 16 beyond tcp-tls-<cert>: TCP + TLS with
SCRAM but no channel binding, and TCP + TLS with a client certificate.

tcp-tls-nocb: pgharbor and PostgreSQL offer SCRAM-SHA-256-PLUS over TLS, so
libpq's default channel_binding=prefer makes the tcp-tls cells bind there
(PgBouncer cannot, so it runs plain SCRAM). channel_binding=disable in the
client's conninfo makes every target run SCRAM-SHA-256 without binding: next
to tcp-tls-ecdsa, what the binding costs pgharbor (and PostgreSQL) per login.

tcp-tls-cert: the login is the client certificate alone (hba method cert),
no password. A throwaway CA signs one client certificate whose CN is
CERT_USER, a role that is a member of bench (as bench_peer is); the
pg_hba-format files of all three targets give CERT_USER `cert` on hostssl
first. Both poolers keep logging in to PostgreSQL as bench (user= and
password= in their database entry, as in the unix-peer cell), so only the
client's login differs.

Both cells serve the ECDSA certificate (as tcp-tls-ecdsa) and are not in the
default --transports: the default profile's time stays what it was.
"""

import os
import secrets

from . import system
from .cli import CERT_USER, SCRAM_ITERATIONS
from .util import die, scram_secret

NOCB = "tcp-tls-nocb"
CERT = "tcp-tls-cert"
CELLS = (NOCB, CERT)
CERT_LINE = f"hostssl all {CERT_USER} 127.0.0.1/32 cert\n"


def conninfo_extra(transport, client_cert):
    """What the cell adds to the client's conninfo. CLIENT_CERT: the path of
    the client certificate and key without extension."""
    if transport == NOCB:
        return " channel_binding=disable"
    if transport == CERT:
        return f" sslcert={client_cert}.crt sslkey={client_cert}.key"
    return ""


def ca_file(tmp):
    return f"{tmp}/pg/ssl/client-ca.crt"


def client_cert(tmp):
    """The client certificate's path without extension: in a directory of the
    invoking user's (libpq refuses a key that others may read)."""
    return f"{tmp}/client/{CERT_USER}"


def make_pki(tmp):
    """A CA (ECDSA P-256, 2 days) and a client certificate with CN=CERT_USER it
    signs, with the openssl CLI. The CA's certificate goes next to the server
    certificates (readable by the postgres OS user: PostgreSQL and PgBouncer
    read it); the client's key is mode 0600 in its own 0700 directory."""
    ssl, cdir = f"{tmp}/pg/ssl", f"{tmp}/client"
    os.makedirs(cdir, mode=0o700, exist_ok=True)
    ca_key, ca_crt, cli = f"{cdir}/client-ca.key", ca_file(tmp), client_cert(tmp)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-sha256"]
    steps = [
        ["openssl", "req", "-x509", *ec, "-days", "2", "-subj", "/CN=pgbench-run client CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
         "-keyout", ca_key, "-out", ca_crt],
        ["openssl", "req", "-new", *ec, "-subj", f"/CN={CERT_USER}", "-keyout", f"{cli}.key", "-out", f"{cli}.csr"],
        ["openssl", "x509", "-req", "-in", f"{cli}.csr", "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
         "-days", "2", "-sha256", "-out", f"{cli}.crt"],
    ]
    for cmd in steps:
        p = system.run(cmd)
        if p.returncode != 0:
            die(f"openssl could not make the {CERT} cell's certificates: {p.stderr.strip()}")
    os.chmod(ca_crt, 0o644)
    for f in (ca_key, f"{cli}.key"):
        os.chmod(f, 0o600)


def role_sql():
    """CERT_USER's role: a login without password, with bench's privileges."""
    return f"CREATE ROLE {CERT_USER} LOGIN;\nGRANT bench TO {CERT_USER};\n"


def bouncer_userlist_line():
    """PgBouncer 1.18 looks a login's user up in auth_file before its hba
    rule is read (cert included, as the peer cell found for peer), so
    CERT_USER needs a line: the secret of a random password nobody is given,
    so a password login as CERT_USER can never succeed."""
    return f'"{CERT_USER}" "{scram_secret(secrets.token_hex(16), SCRAM_ITERATIONS)}"\n'


def describe():
    return (f"cell TCP + TLS + client certificate: role {CERT_USER} (member of bench) logs in with a client "
            f"certificate (CN={CERT_USER}, ECDSA P-256, signed by a throwaway CA) and no password, by "
            f"`{CERT_LINE.strip()}` first in every target's rules (PostgreSQL: ssl_ca_file; pgharbor: "
            "tls.ca_file; PgBouncer: client_tls_ca_file and auth_type = hba); with the CA configured, every "
            "TLS client of every cell is asked for a certificate (those of the other cells send none); both "
            "poolers log in to PostgreSQL as bench")


NOCB_DESC = ("cell TCP + TLS, no channel binding: as TCP + TLS (ECDSA P-256) with channel_binding=disable, "
             "so SCRAM-SHA-256 without -PLUS on every target")


def check_possible(s):
    """The cert cell changes the cluster's pg_hba.conf and roles: not with --pg."""
    if s.cert and s.pg:
        die(f"--transports {CERT} needs the throwaway PostgreSQL (its pg_hba.conf gets a cert line "
            f"for role {CERT_USER} and ssl_ca_file): not with --pg")
