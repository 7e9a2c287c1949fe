"""The figures of the runs and their formatting: CPU per unit, the round
order, per-round pairs of cells, medians, percentiles. Pure."""

from harbor_bench.stats import median


def us_per(ticks, hz, count):
    """Microseconds of CPU per unit: TICKS clock ticks at HZ over COUNT units; None without units."""
    return ticks / hz * 1e6 / count if count else None


def cell_order(cells, rnd):
    """The cells of round RND: as given in odd rounds, reversed in even ones."""
    return list(cells) if rnd % 2 else list(reversed(cells))


def by_round(rows, cell, field):
    """{round: float(row[field])} of the rows of CELL that have the figure."""
    return {r["round"]: float(r[field]) for r in rows if r["cell"] == cell and r.get(field) not in (None, "")}


def paired(rows, a, b, field, op="ratio"):
    """Per round, A's FIELD over (op="ratio") or minus (op="diff") B's, for the rounds both have."""
    xa, xb = by_round(rows, a, field), by_round(rows, b, field)
    rounds = sorted(set(xa) & set(xb), key=int)
    if op == "ratio":
        return [xa[r] / xb[r] for r in rounds if xb[r]]
    return [xa[r] - xb[r] for r in rounds]


def cell_median(rows, cell, field):
    xs = list(by_round(rows, cell, field).values())
    return median(xs) if xs else None


def fmt(x, digits=2, suffix=""):
    return "-" if x is None else f"{x:.{digits}f}{suffix}"


def fmt_range(xs, digits=2, suffix=""):
    """'1.02x (0.98 to 1.05)': the median and range of paired figures."""
    if not xs:
        return "-"
    return f"{fmt(median(xs), digits, suffix)} ({min(xs):.{digits}f} to {max(xs):.{digits}f})"


def percentile(xs, q):
    """The nearest-rank Q-th percentile (0-100) of XS, None when empty."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]

