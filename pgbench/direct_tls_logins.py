#!/usr/bin/env python3
"""Login cost of direct TLS (PostgreSQL 17's sslnegotiation=direct) against
the SSLRequest path, through one running pgharbor, with one client: pgbench
cannot measure direct TLS because Debian 12's libpq is 15.

Usage: pgbench/direct_tls_logins.py PORT CA_FILE USER DB POOLER_PID [SECONDS]

Logs in over TCP 127.0.0.1:PORT again and again for SECONDS (default 5) per
mode, alternating the modes in 4 rounds: "direct" (TLS at once, ALPN
"postgresql") and "sslrequest" (SSLRequest, then TLS, as libpq 15). Each
login: TLS handshake (ECDHE, TLS 1.3), StartupMessage, an authentication the
pooler must not ask a password for (trust or peer-free: use a trust user),
ReadyForQuery, Terminate. Prints, per mode, logins per second and the
pooler's CPU per login (utime+stime of POOLER_PID from /proc, in µs).
"""
import os, socket, ssl, struct, sys, time

SSL_REQUEST = struct.pack("!II", 8, 80877103)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def startup(user, db):
    body = struct.pack("!I", 196608) + b"".join(
        k.encode() + b"\0" + v.encode() + b"\0" for k, v in (("user", user), ("database", db))
    ) + b"\0"
    return struct.pack("!I", len(body) + 4) + body


def login(port, ctx, mode, packet):
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    # As libpq: small writes must not wait for a delayed ACK.
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if mode == "sslrequest":
            raw.sendall(SSL_REQUEST)
            if raw.recv(1) != b"S":
                raise RuntimeError("SSLRequest refused")
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        s.sendall(packet)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("closed before ReadyForQuery")
            buf += chunk
            while len(buf) >= 5:
                n = struct.unpack("!I", buf[1:5])[0]
                if len(buf) < 1 + n:
                    break
                tag, buf = buf[0:1], buf[1 + n:]
                if tag == b"E":
                    raise RuntimeError("login refused")
                if tag == b"R" and n > 8:
                    raise RuntimeError("the pooler asked for a password: use a trust user")
                if tag == b"Z":
                    s.sendall(b"X\0\0\0\4")
                    s.close()
                    return
    finally:
        raw.close()


def main():
    port, ca, user, db, pid = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 5.0
    packet = startup(user, db)
    ctxs = {}
    for mode in ("direct", "sslrequest"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(ca)
        if mode == "direct":
            ctx.set_alpn_protocols(["postgresql"])
        ctxs[mode] = ctx
    totals = {m: [0, 0.0, 0.0] for m in ctxs}
    for r in range(4):
        for mode in (("direct", "sslrequest") if r % 2 == 0 else ("sslrequest", "direct")):
            n, cpu0, t0 = 0, cpu_seconds(pid), time.monotonic()
            while time.monotonic() - t0 < seconds / 4:
                login(port, ctxs[mode], mode, packet)
                n += 1
            t, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
            totals[mode][0] += n
            totals[mode][1] += t
            totals[mode][2] += cpu
    for mode, (n, t, cpu) in totals.items():
        print(f"{mode:10} {n:6} logins  {n / t:7.1f} logins/s  pooler {cpu / n * 1e6:7.1f} µs CPU/login")


if __name__ == "__main__":
    main()
