"""The fleet part: pgbench -S through HAProxy to 1 pgharbor and to 2
(balance leastconn over two ports), its runs and its summary table."""

from . import measure
from .figures import cell_median, fmt, fmt_range, paired


def part_fleet(fl, mode, fe):
    """1 instance (pool P) against 2 (P/2 each) in transaction mode; in
    session mode every instance's pool holds the most clients."""
    top = max(fl.a.clients)
    one_pool, two_pool = (fl.a.pool_size, max(1, fl.a.pool_size // 2)) if mode == "transaction" else (top, top)
    solo, _ = fl.start_harbor("solo", fe["solo"], mode, one_pool)
    peers = {2: (f"{fl.tmp}/pair2", fe["pair2"]), 3: (f"{fl.tmp}/pair3", fe["pair3"])}
    a, _ = fl.start_harbor("pair2", fe["pair2"], mode, two_pool, 2, peers)
    b, _ = fl.start_harbor("pair3", fe["pair3"], mode, two_pool, 3, peers)
    try:
        cells = []
        for c in fl.a.clients:
            measure.warm(fl, fe["one"], c, ["-S"])
            measure.warm(fl, fe["two"], c, ["-S"])
            cells += [(f"1x-c{c}", c, fe["one"], ["-S"], [solo.pid]),
                      (f"2x-c{c}", c, fe["two"], ["-S"], [a.pid, b.pid])]
        measure.rounds(fl, "fleet", mode, cells)
    finally:
        for p in (solo, a, b):
            fl.stop(p)


def fleet_lines(rows, mode, clients):
    """The 1-vs-2 instance table rows of one pool mode, per client count."""
    out = []
    for c in clients:
        one, two = f"1x-c{c}", f"2x-c{c}"
        for cell, label in ((one, "1 instance"), (two, "2 instances")):
            out.append(f"| {mode} | {c} | {label} | {fmt(cell_median(rows, cell, 'tps'), 0)} | "
                       f"{fmt(cell_median(rows, cell, 'latency_ms'), 3)} | "
                       f"{fmt(cell_median(rows, cell, 'pooler_us_per_tx'), 1)} | "
                       f"{fmt(cell_median(rows, cell, 'haproxy_us_per_tx'), 1)} |")
        out.append(f"| {mode} | {c} | **2 / 1, paired** | {fmt_range(paired(rows, two, one, 'tps'), suffix='x')} | | "
                   f"{fmt_range(paired(rows, two, one, 'pooler_us_per_tx'), suffix='x')} | "
                   f"{fmt_range(paired(rows, two, one, 'haproxy_us_per_tx'), suffix='x')} |")
    return out


def fleet_section(rows, modes, clients):
    """summary.md's 1-vs-2 instance table."""
    head = ["## 1 and 2 pgharbor instances behind HAProxy (`pgbench -n -S`)", "",
            "Medians of the rounds; the paired rows are the median (range) of the per-round ratios "
            "2 instances / 1 instance, runs made back to back. Pooler CPU is the sum over the "
            "instances of the cell.", "",
            "| mode | clients | target | tps | latency ms | pooler µs/tx | HAProxy µs/tx |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    body = []
    for m in modes:
        body += fleet_lines([r for r in rows if r["part"] == "fleet" and r["mode"] == m], m, clients)
    return head + body + [""]

