"""Processes, privileges, packages and certificates.

PostgreSQL and PgBouncer refuse to run as root, so as root they run as the
`postgres` OS user (subprocess's user=/group=, which, unlike runuser, keeps
the open-files limit this process raised). Every process started here is
stopped by its pid, never by name: the machine is shared.
"""

import grp
import hashlib
import os
import pwd
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import time

from . import procfs
from .util import die, say, warn

IS_ROOT = os.geteuid() == 0
DB_USER = "postgres"
# Connection settings from the caller's environment must not leak into pgbench.
LIBPQ_ENV = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGDATABASE",
             "PGSERVICE", "PGSERVICEFILE", "PGOPTIONS", "PGCONNECT_TIMEOUT", "PGTARGETSESSIONATTRS",
             "PGCLIENTENCODING", "PGAPPNAME")
LIBPQ_PREFIXES = ("PGSSL", "PGGSS", "PGREQUIRE")


def clean_environment():
    for k in list(os.environ):
        if k in LIBPQ_ENV or k.startswith(LIBPQ_PREFIXES):
            del os.environ[k]


def raise_fd_limit(want):
    """The open-files soft limit to WANT, and the hard one too when it is
    lower and we may (root); else as high as the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard >= want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return want
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        return want
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard


def fd_soft_limit():
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def as_db():
    """subprocess keyword arguments that run a child as the database OS user
    (postgres when we are root, else ourselves)."""
    if not IS_ROOT:
        return {}
    pw = pwd.getpwnam(DB_USER)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def db_user_exists():
    try:
        pwd.getpwnam(DB_USER)
        return True
    except KeyError:
        return False


def give_to_db(*paths):
    """Gives files and directories (recursively) to the database OS user when we are root."""
    if not IS_ROOT:
        return
    pw = pwd.getpwnam(DB_USER)
    group = grp.getgrgid(pw.pw_gid).gr_name
    for top in paths:
        shutil.chown(top, DB_USER, group)
        for root, dirs, files in os.walk(top):
            for name in dirs + files:
                shutil.chown(os.path.join(root, name), DB_USER, group)


def db_can_enter(path):
    """Whether the database OS user can traverse PATH (mktemp makes 0700 dirs)."""
    if not IS_ROOT:
        return True
    return subprocess.run(["test", "-x", path], **as_db()).returncode == 0


def run(cmd, env=None, stdin=None, timeout=None, db=False, **kw):
    """A command to completion, output captured as text (stdout, stderr, rc)."""
    p = subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout,
                       **(as_db() if db else {}), **kw)
    return p


def stop_pid(pid, sig=signal.SIGTERM, proc=None):
    """Sends SIG to PID, waits up to 10 s for it to go, then kills it; reaps
    PROC (our Popen of it) so it leaves no zombie."""
    if not pid or not procfs.alive(pid):
        if proc:
            proc.poll()
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    for _ in range(100):
        if proc is not None and proc.poll() is not None:
            return
        if not procfs.alive(pid):
            return
        time.sleep(0.1)
    warn(f"process {pid} did not stop on {signal.Signals(sig).name}: killing it")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc:
        proc.wait()


# ---------------------------------------------------------------- install --

def find_pg_bindir():
    """PostgreSQL's server binaries: pg_config --bindir, else the newest /usr/lib/postgresql/<v>/bin."""
    def ok(d):
        return d and all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "postgres", "pg_ctl"))
    if shutil.which("pg_config"):
        d = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        if ok(d):
            return d
    base = "/usr/lib/postgresql"
    versions = sorted((v for v in os.listdir(base) if v.replace(".", "").isdigit()),
                      key=lambda v: [int(x) for x in v.split(".")], reverse=True) if os.path.isdir(base) else []
    return next((f"{base}/{v}/bin" for v in versions if ok(f"{base}/{v}/bin")), None)


def find_sbin(name):
    """NAME's executable in /usr/sbin (off a user's PATH on Debian), else on PATH."""
    for p in (f"/usr/sbin/{name}", shutil.which(name)):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def find_pgbouncer():
    return find_sbin("pgbouncer")


def find_haproxy():
    return find_sbin("haproxy")


def haproxy_version(binary):
    """The version `haproxy -v` prints ("HAProxy version 2.6.12-1+deb12u4 2026/10/17 - ..."), or "?"."""
    words = run([binary, "-v"]).stdout.split()
    return words[2] if len(words) > 2 else "?"


class Installer:
    """apt-get install of what is missing, once `apt-get update`d (root, or sudo)."""

    def __init__(self, allowed):
        self.allowed, self.updated = allowed, False

    def install(self, *pkgs):
        if not self.allowed:
            return False
        sudo = []
        if not IS_ROOT:
            if not shutil.which("sudo"):
                die(f"missing packages: {' '.join(pkgs)} (not root and no sudo: install them, then rerun)")
            sudo = ["sudo"]
        if not shutil.which("apt-get"):
            die(f"missing packages: {' '.join(pkgs)} (no apt-get: install them by hand)")
        if not self.updated:
            say("apt-get update")
            subprocess.run(sudo + ["apt-get", "update", "-qq"], stdout=2)
            self.updated = True
        say(f"apt-get install {' '.join(pkgs)}")
        return subprocess.run(sudo + ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install",
                                      "-y", "-qq", "--no-install-recommends", *pkgs], stdout=2).returncode == 0


# ----------------------------------------------------------- certificates --

CERT_DESC = {"ecdsa": "ECDSA P-256", "rsa": "RSA-2048"}
CERT_KEYOPTS = {"ecdsa": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
                "rsa": ["-newkey", "rsa:2048"]}


def make_cert(kind, ssl_dir):
    """A self-signed server certificate for localhost / 127.0.0.1: <kind>.crt, <kind>.key (0600)."""
    key, crt = f"{ssl_dir}/{kind}.key", f"{ssl_dir}/{kind}.crt"
    p = run(["openssl", "req", "-x509", *CERT_KEYOPTS[kind], "-sha256", "-nodes", "-days", "2",
             "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
             "-keyout", key, "-out", crt])
    if p.returncode != 0:
        die(f"openssl could not make the {kind} certificate: {p.stderr.strip()}")
    os.chmod(key, 0o600)
    os.chmod(crt, 0o644)


def sha256_colons(der):
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def cert_fingerprint(path):
    """SHA-256 fingerprint of a PEM certificate file, as openssl prints it."""
    with open(path) as f:
        return sha256_colons(ssl.PEM_cert_to_DER_cert(f.read()))


def served_fingerprint(host, port, timeout=5.0):
    """SHA-256 fingerprint of the certificate a PostgreSQL-protocol server
    serves on TCP (SSLRequest, then the TLS handshake, as libpq does), or ""."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.sendall((8).to_bytes(4, "big") + (80877103).to_bytes(4, "big"))
            if s.recv(1) != b"S":
                return ""
            with ctx.wrap_socket(s) as t:
                der = t.getpeercert(binary_form=True)
                try:
                    t.unwrap()  # close_notify: no "unexpected eof" warning in the server's log
                except (OSError, ssl.SSLError):
                    pass
                return sha256_colons(der)
    except (OSError, ssl.SSLError):
        return ""
