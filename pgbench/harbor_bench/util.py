"""Small things every module needs: messages on stderr, the error that ends
the run (cleanup still runs), a SCRAM secret builder and a free-port finder.
"""

import base64
import hashlib
import hmac
import os
import socket
import sys


class Die(Exception):
    """A reason to stop the run: printed as "ERROR: ...", exit status 1,
    after the servers this run started are stopped."""


def say(msg):
    sys.stderr.write(f"==> {msg}\n")
    sys.stderr.flush()


def warn(msg):
    sys.stderr.write(f"WARNING: {msg}\n")
    sys.stderr.flush()


def die(msg):
    raise Die(msg)


def scram_secret(password: str, iterations: int) -> str:
    """A PostgreSQL SCRAM-SHA-256 secret for PASSWORD with a fresh random salt:
    SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey> (RFC 5802/7677), the
    form `ALTER ROLE ... PASSWORD '<secret>'` stores as is. PostgreSQL 15
    cannot lower the iteration count itself, hence this: every target pays
    the same cheap key derivation."""
    def b64(b):
        return base64.b64encode(b).decode("ascii")
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def free_port(start: int) -> int:
    """The first TCP port >= START that can be bound on 127.0.0.1."""
    for port in range(start, min(start + 200, 65536)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # Servers bind with SO_REUSEADDR; do the same so TIME_WAIT leftovers
            # of an earlier run do not make a usable port look taken.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise Die(f"no free TCP port in {start}..{start + 199}")
