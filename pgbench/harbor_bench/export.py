"""The machine-readable outputs next to summary.md: results.json (every run,
the per-cell medians, the ratios, the idle-client rows), medians.csv, and
the gnuplot inputs plots/<workload>.dat and .gp.

All of them are derived from raw.csv alone, so an old results directory can
be exported again (`bench.py export`) after this code changes.
"""

import csv
import json
import os
import statistics

from .model import BASE, BULK, TARGETS, TLS_PREFIX, TRANSPORTS, num, typed
from .stats import (Cells, cpu_field, median, ordered, ratio, spread, target_labels, unit,
                    workload_order, workload_title)

RATIO_PAIRS = (("pgharbor", "direct"), ("pgharbor", "pgbouncer"), ("pgbouncer", "direct"),
               ("pgharbor", "pgharbor-notls"), ("pooler", "direct"), ("pooler", "pgbouncer"),
               ("pgharbor", BASE))
# Pairs whose pooler CPU (per transaction / per GB) is compared too.
CPU_RATIO_PAIRS = (("pgharbor", BASE),)
IDLE_NUMERIC = ("clients", "connected", "failed", "rss_before_kib", "rss_after_kib")
MEDIAN_COLUMNS = ["workload", "transport", "target", "unit", "runs", "ok_runs", "median", "spread_pct",
                  "latency_ms", "pooler_cpu", "pooler_cpu_unit", "flagged_runs"]


def load_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cell_medians(rows):
    """One dict per (workload, transport, target) cell, in display order."""
    cells = Cells(rows)
    keys = cells.by_cell.keys()
    out = []
    for w in workload_order([k[0] for k in keys]):
        for t in ordered([k[1] for k in keys], TRANSPORTS):
            for g in ordered([k[2] for k in keys], TARGETS):
                if (w, t, g) not in keys:
                    continue
                vals = cells.values(w, t, g)
                s = spread(vals)
                out.append({"workload": w, "transport": t, "target": g, "unit": unit(w),
                            "runs": len(cells.runs(w, t, g)), "ok_runs": len(vals), "median": median(vals),
                            "spread_pct": None if s is None else round(s, 2),
                            "latency_ms": cells.med(w, t, g, "latency_ms"),
                            "pooler_cpu": cells.med(w, t, g, cpu_field(w)),
                            "pooler_cpu_unit": "s/GB" if w in BULK else "µs/tx",
                            "flagged_runs": sum(1 for r in cells.runs(w, t, g) if r["flags"])})
    return out


def ratios(rows):
    """pgharbor / direct, pgharbor / PgBouncer, PgBouncer / direct (and pgharbor
    with / without [tls], pgharbor / pgharbor-base) per cell, and TLS / plain per
    target: the ratio of the medians and the paired per-round ratios (median,
    min, max); metric "throughput" (tps or MB/s). pgharbor / pgharbor-base also
    as kind "pgharbor/pgharbor-base cpu", metric "pooler_cpu": the pooler's CPU
    per transaction (per GB for bulk), where below 1 means the new build is
    cheaper."""
    medians = {(c["workload"], c["transport"], c["target"]): c for c in cell_medians(rows)}
    cells = Cells(rows)
    out = []

    def add(kind, w, num_cell, den_cell, cpu=False):
        if (w, *num_cell) not in medians or (w, *den_cell) not in medians:
            return
        key = "pooler_cpu" if cpu else "median"
        p = cells.paired(w, num_cell, den_cell, cpu_field(w) if cpu else None)
        out.append({"kind": kind, "workload": w,
                    "metric": "pooler_cpu" if cpu else "throughput",
                    "unit": medians[(w, *num_cell)]["pooler_cpu_unit" if cpu else "unit"],
                    "numerator": {"transport": num_cell[0], "target": num_cell[1]},
                    "denominator": {"transport": den_cell[0], "target": den_cell[1]},
                    "ratio_of_medians": ratio(medians[(w, *num_cell)][key], medians[(w, *den_cell)][key]),
                    "paired_median": statistics.median(p) if p else None,
                    "paired_min": p[0] if p else None, "paired_max": p[-1] if p else None,
                    "pairs": len(p)})

    for (w, t, g) in medians:
        for a, b in RATIO_PAIRS:
            if g == a:
                add(f"{a}/{b}", w, (t, a), (t, b))
        for a, b in CPU_RATIO_PAIRS:
            if g == a:
                add(f"{a}/{b} cpu", w, (t, a), (t, b), cpu=True)
        if t.startswith(TLS_PREFIX):
            add("tls/plain", w, (t, g), ("tcp", g))
    return out


def medians_csv(rows, path):
    """One line per cell; with a pgharbor-base target (--baseline-bin) two more
    columns, filled on pgharbor's lines: its throughput and pooler CPU over
    pgharbor-base's in the same cell (ratio of the medians)."""
    cells = cell_medians(rows)
    cols = list(MEDIAN_COLUMNS)
    with_base = any(c["target"] == BASE for c in cells)
    by = {(c["workload"], c["transport"], c["target"]): c for c in cells}
    if with_base:
        cols += ["vs_base", "cpu_vs_base"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for c in cells:
            line = dict(c)
            if with_base:
                b = by.get((c["workload"], c["transport"], BASE)) if c["target"] == "pgharbor" else None
                line["vs_base"] = ratio(c["median"], b["median"]) if b else None
                line["cpu_vs_base"] = ratio(c["pooler_cpu"], b["pooler_cpu"]) if b else None
            w.writerow({k: ("" if line[k] is None else line[k]) for k in cols})


def idle_json(rows):
    """idle.csv's rows with numbers as numbers and no error as None."""
    out = []
    for r in rows:
        d = dict(r)
        for k in IDLE_NUMERIC:
            d[k] = int(r[k]) if num(r.get(k)) is not None else None
        for k in ("kib_per_client", "seconds"):
            d[k] = num(r.get(k))
        d["error"] = r.get("error") or None
        out.append(d)
    return out


def results_json(rows):
    return {"runs": [typed(r) for r in rows], "medians": cell_medians(rows), "ratios": ratios(rows)}


GNUPLOT = """set terminal svg size 900,500 dynamic font "sans,12"
set output "{w}.svg"
set title "{title}: {unit} by transport x TLS (median)"
set ylabel "{unit}"
set yrange [0:*]
set datafile missing "-"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key top right
set grid ytics
plot for [i=2:{last}] "{w}.dat" using i:xtic(1) title columnheader(i)
"""


def plot_files(rows, outdir):
    """gnuplot inputs: per workload a .dat (rows: transports; columns: targets;
    '-' = not measured) and a .gp writing <workload>.svg. Returns the .gp files."""
    os.makedirs(outdir, exist_ok=True)
    cells = cell_medians(rows)
    made = []
    labels = target_labels(rows)
    for w in workload_order({c["workload"] for c in cells}):
        cs = [c for c in cells if c["workload"] == w]
        ts = ordered({c["transport"] for c in cs}, TRANSPORTS)
        gs = ordered({c["target"] for c in cs}, TARGETS)
        m = {(c["transport"], c["target"]): c["median"] for c in cs}
        with open(os.path.join(outdir, f"{w}.dat"), "w") as f:
            f.write("transport " + " ".join(f'"{labels[g]}"' for g in gs) + "\n")
            for t in ts:
                vals = [m.get((t, g)) for g in gs]
                f.write(f'"{TRANSPORTS.get(t, t)}" '
                        + " ".join("-" if v is None else f"{v:.1f}" for v in vals) + "\n")
        gp = os.path.join(outdir, f"{w}.gp")
        with open(gp, "w") as f:
            f.write(GNUPLOT.format(w=w, title=workload_title(w), unit=unit(w), last=len(gs) + 1))
        made.append(gp)
    return made


def export(path, outdir, idle_path=None):
    """results.json, medians.csv and the plot inputs from raw.csv at PATH."""
    rows = load_rows(path)
    data = results_json(rows)
    if idle_path and os.path.exists(idle_path):
        data["idle"] = idle_json(load_rows(idle_path))
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    medians_csv(rows, os.path.join(outdir, "medians.csv"))
    plot_files(rows, os.path.join(outdir, "plots"))
