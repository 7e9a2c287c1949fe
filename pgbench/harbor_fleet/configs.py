"""The generated configs: one pgharbor's TOML and HAProxy's. Pure."""


def toml_list(xs):
    return "[" + ", ".join(f'"{x}"' for x in xs) + "]"


def harbor_config(port, sock, instance_id, peers, mode, pool_size, auth_file, backend, proxy_from=()):
    """One pgharbor's TOML: TCP on 127.0.0.1:PORT, its own socket dir, in a
    fleet when INSTANCE_ID (with PEERS {id: socket dir} for cancels)."""
    listen = ['addresses = ["127.0.0.1"]', f"port = {port}", f'unix_socket_dir = "{sock}"']
    if instance_id:
        listen.append(f"instance_id = {instance_id}")
    if proxy_from:
        listen.append(f"proxy_protocol_from = {toml_list(proxy_from)}")
    text = ("[listen]\n" + "\n".join(listen) + "\n\n"
            f'[auth]\nmethod = "scram-sha-256"\nauth_file = "{auth_file}"\n\n'
            f'[pool]\nmode = "{mode}"\ndefault_pool_size = {pool_size}\nmax_client_conn = 1000\n'
            'shutdown_timeout = "120s"\n\n'
            f'[databases.bench]\nconninfo = "{backend}"\n')
    if instance_id and peers:
        text += "\n[peers]\n" + "".join(f'{i} = "host={d} port={p}"\n' for i, (d, p) in sorted(peers.items()))
    return text


def haproxy_config(frontends):
    """HAProxy's config: FRONTENDS [(name, port, [(server, port, send_proxy)])],
    mode tcp, leastconn; no health checks (their connections would be charged
    to the poolers' CPU) and no logging."""
    out = ["global", "    maxconn 4096", "", "defaults", "    mode tcp", "    timeout connect 5s",
           "    timeout client 30m", "    timeout server 30m", ""]
    for name, port, servers in frontends:
        out += [f"frontend fe_{name}", f"    bind 127.0.0.1:{port}", f"    default_backend be_{name}", "",
                f"backend be_{name}", "    balance leastconn"]
        out += [f"    server {s} 127.0.0.1:{p}" + (" send-proxy-v2" if pp else "") for s, p, pp in servers]
        out.append("")
    return "\n".join(out)
