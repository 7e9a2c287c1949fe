"""A raw TLS client for tests/direct_tls.rs: direct TLS (no SSLRequest), as
PostgreSQL 17's sslnegotiation=direct, which Debian 12's libpq 15 cannot do.

Connects to argv[1] (a TCP port on 127.0.0.1 or a socket path), starts TLS
at once offering the ALPN protocols in argv[2] ("-": none), checks the
certificate against the CA file argv[3] for "localhost", then does argv[4]
("login": StartupMessage for user argv[5] and database argv[6], then a
query; "sslrequest": an SSLRequest inside TLS), and prints what it saw as
JSON: handshake ("ok" or "failed" with reason), alpn, the message tags,
ErrorResponse fields, the query's value, and how the connection closed.
"""
import json, socket, ssl, struct, sys
target, alpn, ca, action, user, db = sys.argv[1:7]
out = {"messages": [], "errors": []}
def emit():
    print(json.dumps(out))
    sys.exit(0)
if target.startswith("/"):
    raw = socket.socket(socket.AF_UNIX)
    raw.settimeout(10)
    raw.connect(target)
else:
    raw = socket.create_connection(("127.0.0.1", int(target)), timeout=10)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.load_verify_locations(ca)
if alpn != "-":
    ctx.set_alpn_protocols(alpn.split(","))
try:
    s = ctx.wrap_socket(raw, server_hostname="localhost")
except (ssl.SSLError, OSError) as e:
    out["handshake"] = "failed"
    out["reason"] = (getattr(e, "reason", None) or "") + " " + type(e).__name__ + ": " + str(e)
    emit()
out["handshake"] = "ok"
out["alpn"] = s.selected_alpn_protocol()
buf = b""
def recv_msg():
    global buf
    while True:
        if len(buf) >= 5:
            n = struct.unpack("!I", buf[1:5])[0]
            if len(buf) >= 1 + n:
                tag, body = chr(buf[0]), buf[5:1 + n]
                buf = buf[1 + n:]
                return tag, body
        try:
            chunk = s.recv(65536)
        except (ssl.SSLError, OSError) as e:
            return None, type(e).__name__
        if not chunk:
            return None, "eof"
        buf += chunk
def send(b):
    try:
        s.sendall(b)
    except (ssl.SSLError, OSError):
        pass
def read_until(last):
    while True:
        tag, body = recv_msg()
        if tag is None:
            out["closed"] = body
            out["leftover"] = len(buf)
            return False
        out["messages"].append(tag)
        if tag == "E":
            fields = {}
            for f in body.split(b"\0"):
                if f:
                    fields[chr(f[0])] = f[1:].decode()
            out["errors"].append(fields)
        if tag == "D":
            n = struct.unpack("!I", body[2:6])[0]
            out["value"] = body[6:6 + n].decode()
        if tag == last:
            return True
if action == "sslrequest":
    send(struct.pack("!II", 8, 80877103))
    read_until(None)
    emit()
params = b"user\0" + user.encode() + b"\0database\0" + db.encode() + b"\0\0"
send(struct.pack("!II", 8 + len(params), 196608) + params)
if read_until("Z"):
    q = b"SELECT 'served'\0"
    send(b"Q" + struct.pack("!I", 4 + len(q)) + q)
    read_until("Z")
    send(b"X\0\0\0\x04")
emit()
