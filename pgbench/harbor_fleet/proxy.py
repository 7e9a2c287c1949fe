"""The proxy part: pgharbor's CPU per login behind HAProxy with
send-proxy-v2 (proxy_protocol_from = 127.0.0.1/32) against HAProxy without it."""

from . import measure
from .figures import cell_median, fmt, fmt_range, paired, us_per


def part_proxy(fl, fe):
    """pgbench -C -S -c 8 through HAProxy with send-proxy-v2 and without, interleaved over the rounds."""
    mode = "transaction"
    pp, _ = fl.start_harbor("proxy", fe["proxy_harbor"], mode, fl.a.pool_size, proxy_from=["127.0.0.1/32"])
    plain, _ = fl.start_harbor("plain", fe["plain_harbor"], mode, fl.a.pool_size)
    try:
        extra = ["-C", "-S"]
        measure.warm(fl, fe["proxy"], 8, extra)
        measure.warm(fl, fe["plain"], 8, extra)
        measure.rounds(fl, "proxy", mode, [("send-proxy-v2", 8, fe["proxy"], extra, [pp.pid]),
                                           ("plain", 8, fe["plain"], extra, [plain.pid])])
    finally:
        fl.stop(pp)
        fl.stop(plain)


def proxy_section(rows, hz=100):
    """summary.md's PROXY-protocol table and the per-login difference."""
    rows = [r for r in rows if r["part"] == "proxy"]
    cells = ("send-proxy-v2", "plain")
    diff = paired(rows, *cells, "pooler_us_per_tx", op="diff")
    hdiff = paired(rows, *cells, "haproxy_us_per_tx", op="diff")
    pp, plain = (cell_median(rows, c, "pooler_us_per_tx") for c in cells)
    logins = cell_median(rows, "plain", "tx")
    out = ["## PROXY protocol v2 per login (`pgbench -n -C -S -c 8`, transaction pooling)", "",
           "| HAProxy server line | logins/s | pooler µs/login | HAProxy µs/login |", "| --- | ---: | ---: | ---: |"]
    for c in cells:
        out.append(f"| {c} | {fmt(cell_median(rows, c, 'tps'), 0)} | "
                   f"{fmt(cell_median(rows, c, 'pooler_us_per_tx'), 1)} | "
                   f"{fmt(cell_median(rows, c, 'haproxy_us_per_tx'), 1)} |")
    med = pp - plain if None not in (pp, plain) else None
    out += ["", f"Pooler CPU per login, send-proxy-v2 minus plain: {fmt(med, 1)} µs (medians); paired per round "
            f"{fmt_range(diff, 1, ' µs')}. HAProxy, the same difference: paired {fmt_range(hdiff, 1, ' µs')}. "
            f"One clock tick is {fmt(us_per(1, hz, logins), 2)} µs per login at a run's median login count.", ""]
    return out

