#!/usr/bin/env python3
"""Idle clients for pgbench/run's memory measurement (Python 3.11, stdlib only).

  idle.py --pid PID --clients N --user U --dbname D --csv FILE --target NAME
          [--pool-mode MODE] [--timeout SECS] [--concurrency K]
          --phase tcp=HOST:PORT [--phase tls=HOST:PORT] [--phase unix=SOCKET_FILE]

For each phase in turn, reads VmRSS of process PID from /proc/PID/status,
opens N client connections that complete the login (StartupMessage,
authentication, ReadyForQuery) and then send nothing, waits a second for the
pooler to settle, reads VmRSS again and appends one row to FILE:
(after - before) / connected clients is the RSS growth per idle client.
Clients of earlier phases stay connected while later phases run, so a later
phase cannot reuse memory an earlier one freed (pgbench/run gives one phase
per call instead, to a freshly restarted pooler). At the end every client
sends Terminate and waits for the server to close first (so TIME_WAIT lands
on the server's port, not on thousands of local ports).

The password comes from the environment (IDLE_PASSWORD, else PGPASSWORD):
SCRAM-SHA-256, md5, cleartext or trust, whatever the server asks. TLS is
sslmode=require: SSLRequest, then a handshake without certificate checks,
done with ssl.MemoryBIO over plain asyncio streams (asyncio's own TLS
transport allocates a 256 KiB buffer per connection, far more than the
pooler's side of the story).
"""

import argparse
import asyncio
import base64
import csv
import hashlib
import hmac
import os
import resource
import secrets
import ssl
import struct
import sys
import time

CSV_FIELDS = ["target", "transport", "pool_mode", "clients", "connected", "failed",
              "rss_before_kib", "rss_after_kib", "kib_per_client", "seconds", "error"]
PHASE_NAMES = {"tcp": "tcp", "tls": "tcp-tls", "unix": "unix"}


class LoginError(Exception):
    pass


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise LoginError(f"no VmRSS in /proc/{pid}/status")


def parse_phase(text):
    """'tcp=127.0.0.1:6432' -> ('tcp', ('127.0.0.1', 6432)); 'unix=/s/.s.PGSQL.1' -> ('unix', path)."""
    kind, sep, addr = text.partition("=")
    if not sep or kind not in PHASE_NAMES or not addr:
        raise argparse.ArgumentTypeError(f"phase must be tcp=HOST:PORT, tls=HOST:PORT or unix=PATH: {text}")
    if kind == "unix":
        return kind, addr
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"phase {kind}: HOST:PORT expected: {addr}")
    return kind, (host.strip("[]"), int(port))


def raise_fd_limit(need):
    """Soft open-files limit >= need (and the hard one too when we may)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return soft
    if hard != resource.RLIM_INFINITY and hard < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
            return need
        except (ValueError, OSError):
            need = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    return need


# ------------------------------------------------------------ wire + TLS --

class Wire:
    """A byte stream over asyncio streams, optionally through TLS (MemoryBIO)."""

    def __init__(self, reader, writer):
        self.r, self.w, self.tls = reader, writer, None
        self.buf = bytearray()

    async def start_tls(self, ctx):
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.inc, self.out, server_side=False)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                await self._feed()
        await self._flush()

    async def _flush(self):
        data = self.out.read()
        if data:
            self.w.write(data)
            await self.w.drain()

    async def _feed(self):
        data = await self.r.read(65536)
        if not data:
            raise LoginError("server closed the connection")
        self.inc.write(data)

    async def send(self, data):
        if self.tls:
            self.tls.write(data)
            await self._flush()
        else:
            self.w.write(data)
            await self.w.drain()

    async def _fill(self):
        if not self.tls:
            data = await self.r.read(65536)
            if not data:
                raise LoginError("server closed the connection")
            self.buf += data
            return
        while True:
            try:
                chunk = self.tls.read(65536)
            except ssl.SSLWantReadError:
                await self._flush()
                await self._feed()
                continue
            if not chunk:
                raise LoginError("server closed the TLS connection")
            self.buf += chunk
            return

    async def read_exact(self, n):
        while len(self.buf) < n:
            await self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def message(self):
        head = await self.read_exact(5)
        length = struct.unpack("!i", head[1:])[0]
        if not 4 <= length <= 1 << 20:
            raise LoginError(f"bad message length {length}")
        return head[:1], await self.read_exact(length - 4)

    async def close(self, timeout=5.0):
        """Terminate, then wait for the server to close first."""
        try:
            await self.send(b"X" + struct.pack("!i", 4))
            async with asyncio.timeout(timeout):
                while await self.r.read(65536):
                    pass
        except (OSError, LoginError, TimeoutError, ssl.SSLError):
            pass
        self.w.close()


def msg(tag, body):
    return tag + struct.pack("!i", len(body) + 4) + body


def error_text(body):
    fields = dict((f[:1], f[1:].decode("utf-8", "replace")) for f in body.split(b"\0") if f)
    return f"{fields.get(b'S', 'ERROR')} {fields.get(b'C', '')}: {fields.get(b'M', '?')}"


# ------------------------------------------------------------- login ------

class Scram:
    """Client side of SCRAM-SHA-256 (RFC 5802/7677), no channel binding."""

    def __init__(self, password):
        self.password = password.encode("utf-8")
        self.nonce = base64.b64encode(secrets.token_bytes(18)).decode("ascii")
        self.first_bare = f"n=,r={self.nonce}"

    def first(self):
        data = ("n,," + self.first_bare).encode("ascii")
        return b"SCRAM-SHA-256\0" + struct.pack("!i", len(data)) + data

    def final(self, server_first):
        attrs = dict(kv.split("=", 1) for kv in server_first.decode("ascii").split(","))
        if not attrs["r"].startswith(self.nonce):
            raise LoginError("SCRAM: server nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac("sha256", self.password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        stored = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self.first_bare},{server_first.decode('ascii')},{without_proof}".encode("ascii")
        signature = hmac.new(stored, auth_message, "sha256").digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")


def startup(user, dbname):
    params = b""
    for k, v in (("user", user), ("database", dbname), ("application_name", "pgbench-run-idle")):
        params += k.encode() + b"\0" + v.encode("utf-8") + b"\0"
    body = struct.pack("!i", 196608) + params + b"\0"
    return struct.pack("!i", len(body) + 4) + body


async def login(kind, addr, user, dbname, password, ctx):
    if kind == "unix":
        reader, writer = await asyncio.open_unix_connection(addr, limit=8192)
    else:
        reader, writer = await asyncio.open_connection(addr[0], addr[1], limit=8192)
    wire = Wire(reader, writer)
    try:
        if kind == "tls":
            await wire.send(struct.pack("!ii", 8, 80877103))
            answer = await wire.read_exact(1)
            if answer != b"S":
                raise LoginError(f"server answered {answer!r} to SSLRequest")
            await wire.start_tls(ctx)
        await wire.send(startup(user, dbname))
        scram = None
        while True:
            tag, body = await wire.message()
            if tag == b"E":
                raise LoginError(error_text(body))
            if tag == b"Z":
                return wire
            if tag != b"R":
                continue  # ParameterStatus, BackendKeyData, NoticeResponse
            code = struct.unpack("!i", body[:4])[0]
            if code == 0:
                continue
            if password is None and code in (3, 5, 10):
                raise LoginError("the server asks for a password and none was given")
            if code == 3:
                await wire.send(msg(b"p", password.encode("utf-8") + b"\0"))
            elif code == 5:
                inner = hashlib.md5(password.encode("utf-8") + user.encode("utf-8")).hexdigest()
                outer = hashlib.md5(inner.encode("ascii") + body[4:8]).hexdigest()
                await wire.send(msg(b"p", b"md5" + outer.encode("ascii") + b"\0"))
            elif code == 10:
                if b"SCRAM-SHA-256\0" not in body[4:]:
                    raise LoginError(f"no SASL mechanism we know: {body[4:]!r}")
                scram = Scram(password)
                await wire.send(msg(b"p", scram.first()))
            elif code == 11 and scram:
                await wire.send(msg(b"p", scram.final(body[4:])))
            elif code == 12:
                continue
            else:
                raise LoginError(f"unsupported authentication request {code}")
    except BaseException:
        writer.close()
        raise


async def open_clients(kind, addr, n, args, password, ctx, kept):
    """Opens n clients, at most args.concurrency logging in at once; returns (ok, failed, first error)."""
    sem = asyncio.Semaphore(args.concurrency)
    errors = []

    async def one():
        async with sem:
            try:
                async with asyncio.timeout(args.timeout):
                    kept.append(await login(kind, addr, args.user, args.dbname, password, ctx))
                return True
            except (OSError, LoginError, TimeoutError, ssl.SSLError, asyncio.IncompleteReadError) as e:
                errors.append(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
                return False

    tasks = [asyncio.create_task(one()) for _ in range(n)]
    # A pooler that holds logins back (session pooling with fewer backends than
    # clients) must not keep us here for n / concurrency x timeout seconds.
    done, pending = await asyncio.wait(tasks, timeout=args.phase_timeout or None)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if pending:
        errors.insert(0, f"{len(pending)} logins not finished after {args.phase_timeout:.0f} s")
    ok = sum(1 for t in done if t.result())
    return ok, n - ok, errors[0] if errors else ""


async def measure(args):
    password = os.environ.get("IDLE_PASSWORD", os.environ.get("PGPASSWORD"))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    kept = []
    rows = []
    try:
        for kind, addr in args.phase:
            before = vm_rss_kib(args.pid)
            t0 = time.monotonic()
            ok, failed, err = await open_clients(kind, addr, args.clients, args, password, ctx, kept)
            await asyncio.sleep(args.settle)
            after = vm_rss_kib(args.pid)
            seconds = time.monotonic() - t0
            per = f"{(after - before) / ok:.2f}" if ok else ""
            rows.append({"target": args.target, "transport": PHASE_NAMES[kind], "pool_mode": args.pool_mode,
                         "clients": args.clients, "connected": ok, "failed": failed,
                         "rss_before_kib": before, "rss_after_kib": after, "kib_per_client": per,
                         "seconds": f"{seconds:.1f}", "error": err})
            sys.stderr.write(f"  idle {args.target:<10} {PHASE_NAMES[kind]:<8} {ok}/{args.clients} logged in "
                             f"in {seconds:.1f} s; VmRSS {before} -> {after} KiB"
                             + (f" = {per} KiB per client" if per else "")
                             + (f"; {failed} failed, first: {err}" if failed else "") + "\n")
    finally:
        closing = [w.close() for w in kept]
        for i in range(0, len(closing), 500):
            await asyncio.gather(*closing[i:i + 500])
    return rows


def write_rows(path, rows):
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new:
            w.writeheader()
        w.writerows(rows)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="idle.py", description="RSS growth per idle client of a pooler")
    p.add_argument("--pid", type=int, required=True, help="the pooler's process id")
    p.add_argument("--clients", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--dbname", required=True)
    p.add_argument("--csv", required=True, help="file the rows are appended to")
    p.add_argument("--target", required=True, help="target name recorded in the rows")
    p.add_argument("--pool-mode", default="")
    p.add_argument("--phase", type=parse_phase, action="append", required=True)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per login")
    p.add_argument("--concurrency", type=int, default=64, help="logins in flight at once")
    p.add_argument("--settle", type=float, default=1.0, help="seconds between the last login and VmRSS")
    p.add_argument("--phase-timeout", type=float, default=None,
                   help="seconds for all logins of a phase (default 60 + clients / 100)")
    args = p.parse_args(argv)
    if args.phase_timeout is None:
        args.phase_timeout = 60 + args.clients / 100
    if args.clients < 1 or args.concurrency < 1:
        p.error("--clients and --concurrency must be positive")
    return args


def main(argv):
    args = parse_args(argv)
    raise_fd_limit(args.clients * len(args.phase) + 64)
    write_rows(args.csv, asyncio.run(measure(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
