"""Arithmetic and labels the summary, the JSON and the plots share: medians,
spreads, ratios, verdicts against a bar, and display names and orders.

Kept free of I/O so that every figure the summary prints can be checked in
a unit test from a few hand-made rows.
"""

import statistics

from .model import (BULK, MODE_TARGETS, TARGETS, WORKLOADS, num, persistent_clients)


def workload_title(w):
    """A table's heading: "TPC-B-like, 64 clients"."""
    if w in WORKLOADS:
        return WORKLOADS[w]
    p = persistent_clients(w)
    if p:
        return f"{WORKLOADS[p[0]].rsplit(',', 1)[0]}, {p[1]} clients"
    return w


def workload_short(w):
    """A table row's name: "select-only -c 64", "TPC-B-like -c 16"."""
    p = persistent_clients(w)
    if not p:
        return w
    return f"{'select-only' if p[0] == 'persistent' else 'TPC-B-like'} -c {p[1]}"


def workload_order(values):
    """Known workloads first, in WORKLOADS order, persistent ones by client count; then the rest."""
    base = list(WORKLOADS)

    def key(w):
        p = persistent_clients(w)
        if p:
            return (base.index(p[0]), p[1], w)
        return (base.index(w), 0, w) if w in base else (len(base), 0, w)
    return sorted(set(values), key=key)


def target_labels(rows):
    """Display name per target; the poolers started by pgbench/run with their pool mode."""
    modes = {}
    for r in rows:
        if r.get("pool_mode"):
            modes.setdefault(r["target"], r["pool_mode"])
    out = {}
    for g in {r["target"] for r in rows}:
        name = TARGETS.get(g, g)
        if g in MODE_TARGETS:
            mode = modes.get(g, "session")  # raw.csv files from before the column: session
            name = f"pgharbor {mode}, no [tls]" if g == "pgharbor-notls" else f"{name} {mode}"
        out[g] = name
    return out


def subject(targets):
    """The pooler the ratios are about: pgharbor, else an external one (--pooler)."""
    return next((g for g in ("pgharbor", "pooler") if g in targets), None)


def ordered(values, known):
    """VALUES in the order of KNOWN, then the unknown ones sorted."""
    vals = set(values)
    return [k for k in known if k in vals] + sorted(vals - set(known))


def fmt_tps(x):
    if x is None:
        return "–"
    return f"{x:,.0f}".replace(",", " ") if x >= 100 else f"{x:.1f}"


def fmt_ratio(a, b):
    if a is None or not b:
        return "–"
    return f"{a / b:.2f}x"


def fmt_pair(ratios):
    """Paired ratios as "median (min–max)"."""
    if not ratios:
        return "–"
    text = f"{statistics.median(ratios):.2f}x"
    if len(ratios) > 1:
        text += f" ({ratios[0]:.2f}–{ratios[-1]:.2f})"
    return text


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    """(max - min) / median, in percent: how much the runs of one cell disagree."""
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = statistics.median(xs)
    return 100.0 * (max(xs) - min(xs)) / m if m else None


def ratio(a, b):
    return a / b if a is not None and b else None


def unit(workload):
    return "MB/s" if workload in BULK else "tps"


def value(r):
    """The run's throughput: MB/s for bulk runs, tps otherwise."""
    return num(r.get("mb_per_s")) if r["workload"] in BULK else num(r["tps"])


def cpu_field(workload):
    """The pooler-CPU column of a workload: per GB for bulk, per transaction otherwise."""
    return "pooler_s_per_gb" if workload in BULK else "pooler_us_per_tx"


def verdict(ratio_of_medians, pairs, bar):
    """MET / NOT MET when the ratio of the medians and the median of the
    per-round ratios agree; otherwise say the runs do not settle it."""
    if ratio_of_medians is None:
        return "not measured"
    votes = {ratio_of_medians >= bar} | ({statistics.median(pairs) >= bar} if pairs else set())
    if votes == {True}:
        text = "MET"
    elif votes == {False}:
        text = "NOT MET"
    else:
        text = "UNRESOLVED (ratio of medians and paired ratios disagree)"
    if pairs and pairs[0] < bar <= pairs[-1]:
        text += f", paired runs on both sides of {bar}x"
    return text


class Cells:
    """raw.csv rows grouped by cell (workload, transport, target), with the
    lookups every table makes: the median of a field over a cell's ok runs,
    and the per-round ratios of two cells (the "paired" figures)."""

    def __init__(self, rows):
        self.rows = rows
        self.by_cell = {}
        for r in rows:
            self.by_cell.setdefault((r["workload"], r["transport"], r["target"]), []).append(r)

    def runs(self, w, t, g):
        return self.by_cell.get((w, t, g), [])

    def has(self, w, t, g):
        return bool(self.by_cell.get((w, t, g)))

    def ok(self, w, t, g):
        return [r for r in self.runs(w, t, g) if r["status"] == "ok"]

    def values(self, w, t, g, field=None):
        return [num(r[field]) if field else value(r) for r in self.ok(w, t, g)]

    def med(self, w, t, g, field=None):
        return median(self.values(w, t, g, field))

    def by_round(self, w, t, g, field=None):
        return {r["round"]: num(r[field]) if field else value(r) for r in self.ok(w, t, g)}

    def paired(self, w, a, b, field=None):
        """Per-round ratios of cell a = (transport, target) to cell b, sorted;
        of the throughput, or of FIELD (e.g. pooler_us_per_tx)."""
        x, y = self.by_round(w, *a, field), self.by_round(w, *b, field)
        return sorted(x[k] / y[k] for k in x.keys() & y.keys() if x[k] and y[k])

    def ratio_of(self, w, t, a, b, field=None):
        return ratio(self.med(w, t, a, field), self.med(w, t, b, field))


def paired_ratios(rows, w, a, b, field=None):
    """Cells(rows).paired(...), for callers holding bare rows."""
    return Cells(rows).paired(w, a, b, field)
