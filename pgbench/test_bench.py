"""Unit tests for pgbench/bench.py: python3 -m unittest discover -s pgbench"""

import csv
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

FIELDS = ("round,workload,transport,target,command,started,load1_before,ncpu,other_cpus,flags,"
          "status,rc,tps,tx,failed_tx,latency_ms,conn_ms,wall_s,pooler_cpu_s,pooler_us_per_tx,"
          "pg_cpu_s,pgbench_cpu_s,cert,bytes,mb_per_s,pooler_s_per_gb").split(",")


def run(rnd, w, t, g, tps=None, mbps=None, status="ok", cpu=None, flags=""):
    r = {k: "" for k in FIELDS}
    r.update(round=str(rnd), workload=w, transport=t, target=g, command=f"cmd {w}",
             started="2026-01-01T00:00:00+00:00", load1_before="0.5", ncpu="2", other_cpus="0.01",
             flags=flags, status=status, rc="0", tx="100", failed_tx="0", wall_s="2.0")
    if tps is not None:
        r["tps"] = str(tps)
    if mbps is not None:
        r["mb_per_s"] = str(mbps)
    if cpu is not None:
        r["pooler_s_per_gb" if w in bench.BULK else "pooler_us_per_tx"] = str(cpu)
    return r


def sample():
    rows = []
    for rnd, k in ((1, 1.0), (2, 1.1), (3, 0.9)):
        rows += [run(rnd, "connect", "unix", "direct", 200 * k),
                 run(rnd, "connect", "unix", "pgharbor", 2000 * k, cpu=70),
                 run(rnd, "connect", "unix", "pgbouncer", 1000 * k, cpu=100),
                 run(rnd, "connect", "tcp", "direct", 100 * k),
                 run(rnd, "connect", "tcp", "pgharbor", 1000 * k, cpu=80),
                 run(rnd, "connect", "tcp-tls-ecdsa", "direct", 50 * k),
                 run(rnd, "connect", "tcp-tls-ecdsa", "pgharbor", 250 * k, cpu=400),
                 run(rnd, "bulk", "unix", "direct", mbps=300 * k),
                 run(rnd, "bulk", "unix", "pgharbor", mbps=270 * k, cpu=1.5)]
    rows.append(run(3, "connect", "tcp", "pgbouncer", 999, status="pgbench rc=2: boom"))
    return rows


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


class Arithmetic(unittest.TestCase):
    def test_median(self):
        self.assertEqual(bench.median([3, 1, 2]), 2)
        self.assertEqual(bench.median([4, 1, 2, 3]), 2.5)
        self.assertEqual(bench.median([None, 5, None]), 5)
        self.assertIsNone(bench.median([]))
        self.assertIsNone(bench.median([None]))

    def test_spread(self):
        self.assertAlmostEqual(bench.spread([90, 100, 110]), 20.0)
        self.assertIsNone(bench.spread([100]))

    def test_num_and_formats(self):
        self.assertEqual(bench.num("1.5"), 1.5)
        self.assertIsNone(bench.num(""))
        self.assertEqual(bench.fmt_tps(12345.6), "12 346")
        self.assertEqual(bench.fmt_tps(12.34), "12.3")
        self.assertEqual(bench.fmt_tps(None), "–")
        self.assertEqual(bench.fmt_ratio(3, 2), "1.50x")
        self.assertEqual(bench.fmt_ratio(3, 0), "–")
        self.assertEqual(bench.fmt_ratio(None, 2), "–")
        self.assertIsNone(bench.ratio(1, 0))

    def test_value_and_unit(self):
        self.assertEqual(bench.value(run(1, "bulk", "unix", "direct", tps=5, mbps=250)), 250)
        self.assertEqual(bench.value(run(1, "bulkselect", "unix", "direct", tps=5, mbps=90)), 90)
        self.assertEqual(bench.value(run(1, "tpcb", "unix", "direct", tps=5)), 5)
        self.assertEqual(bench.unit("bulkselect"), "MB/s")
        self.assertEqual(bench.unit("establish"), "tps")

    def test_ordered(self):
        self.assertEqual(bench.ordered(["tcp", "zz", "unix", "tcp"], bench.TRANSPORTS), ["unix", "tcp", "zz"])

    def test_paired_ratios(self):
        rows = sample()
        p = bench.paired_ratios(rows, "connect", ("unix", "pgharbor"), ("unix", "direct"))
        self.assertEqual(len(p), 3)
        for x in p:
            self.assertAlmostEqual(x, 10.0)
        # a failed run has no pair
        self.assertEqual(bench.paired_ratios(rows, "connect", ("tcp", "pgbouncer"), ("tcp", "direct")), [])
        # sorted
        rows2 = [run(1, "connect", "unix", "a", 2), run(1, "connect", "unix", "b", 1),
                 run(2, "connect", "unix", "a", 1), run(2, "connect", "unix", "b", 1)]
        self.assertEqual(bench.paired_ratios(rows2, "connect", ("unix", "a"), ("unix", "b")), [1.0, 2.0])

    def test_scram_secret_shape(self):
        s = bench.scram_secret("pw", 16)
        self.assertTrue(s.startswith("SCRAM-SHA-256$16:"))
        self.assertEqual(s.count("$"), 2)


class Writers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.raw = os.path.join(self.dir.name, "raw.csv")
        write_csv(sample(), self.raw)
        self.rows = bench.load_rows(self.raw)

    def tearDown(self):
        self.dir.cleanup()

    def test_cell_medians(self):
        cells = {(c["workload"], c["transport"], c["target"]): c for c in bench.cell_medians(self.rows)}
        c = cells[("connect", "unix", "pgharbor")]
        self.assertAlmostEqual(c["median"], 2000)
        self.assertEqual((c["runs"], c["ok_runs"], c["unit"]), (3, 3, "tps"))
        self.assertEqual(c["pooler_cpu"], 70)
        b = cells[("bulk", "unix", "pgharbor")]
        self.assertAlmostEqual(b["median"], 270)
        self.assertEqual((b["unit"], b["pooler_cpu_unit"]), ("MB/s", "s/GB"))
        f = cells[("connect", "tcp", "pgbouncer")]
        self.assertEqual((f["runs"], f["ok_runs"]), (1, 0))
        self.assertIsNone(f["median"])

    def test_ratios(self):
        rs = bench.ratios(self.rows)
        by = {(r["kind"], r["workload"], r["numerator"]["transport"]): r for r in rs}
        r = by[("pgharbor/direct", "connect", "unix")]
        self.assertAlmostEqual(r["ratio_of_medians"], 10.0)
        self.assertAlmostEqual(r["paired_median"], 10.0)
        self.assertEqual(r["pairs"], 3)
        self.assertAlmostEqual(by[("pgharbor/pgbouncer", "connect", "unix")]["ratio_of_medians"], 2.0)
        self.assertAlmostEqual(by[("pgharbor/direct", "bulk", "unix")]["ratio_of_medians"], 0.9)
        tls = by[("tls/plain", "connect", "tcp-tls-ecdsa")]
        self.assertEqual(tls["denominator"], {"transport": "tcp", "target": tls["numerator"]["target"]})
        self.assertAlmostEqual(by[("tls/plain", "connect", "tcp-tls-ecdsa")]["ratio_of_medians"],
                               0.5 if tls["numerator"]["target"] == "direct" else 0.25)
        # the failed PgBouncer TCP cell gives no number
        self.assertIsNone(by[("pgharbor/pgbouncer", "connect", "tcp")]["ratio_of_medians"])

    def test_export(self):
        bench.export(self.raw, self.dir.name)
        with open(os.path.join(self.dir.name, "results.json")) as f:
            d = json.load(f)
        self.assertEqual(len(d["runs"]), len(self.rows))
        self.assertEqual(d["runs"][0]["round"], 1)
        self.assertIsInstance(d["runs"][0]["tps"], float)
        self.assertIsNone(d["runs"][0]["mb_per_s"])
        self.assertTrue(d["medians"] and d["ratios"])
        with open(os.path.join(self.dir.name, "medians.csv"), newline="") as f:
            med = list(csv.DictReader(f))
        self.assertEqual(len(med), len(d["medians"]))
        self.assertEqual(med[0]["workload"], "connect")
        with open(os.path.join(self.dir.name, "plots", "connect.dat")) as f:
            dat = f.read().splitlines()
        self.assertTrue(dat[0].startswith("transport "))
        self.assertEqual(len(dat), 1 + 3)  # unix, tcp, tcp-tls-ecdsa
        self.assertIn("-", dat[2].split())  # PgBouncer's failed TCP cell
        self.assertTrue(os.path.exists(os.path.join(self.dir.name, "plots", "bulk.gp")))

    def test_summarize_table(self):
        buf = io.StringIO()
        with redirect_stdout(buf):
            bench.summarize(self.raw)
        out = buf.getvalue()
        self.assertIn("| target | Unix socket | TCP plain | TCP + TLS (ECDSA P-256) |", out)
        self.assertIn("| pgharbor / PostgreSQL | 10.00x | 10.00x | 5.00x |", out)
        self.assertIn("| pgharbor / PgBouncer | 2.00x | – |", out)
        self.assertIn("NOT OK: round 3 connect/tcp/pgbouncer", out)
        self.assertIn("### Issue 6's targets", out)
        self.assertIn("bulk, Unix socket: pgharbor / PostgreSQL = 0.90x", out)

    def test_main_usage(self):
        with redirect_stdout(io.StringIO()):
            sys_stderr, sys.stderr = sys.stderr, io.StringIO()
            try:
                self.assertEqual(bench.main(["nonsense"]), 2)
            finally:
                sys.stderr = sys_stderr


class RunArguments(unittest.TestCase):
    """pgbench/run's argument parsing: errors come before anything is installed or started."""
    RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run")

    def run_script(self, *args):
        import subprocess
        return subprocess.run(["bash", self.RUN, *args], capture_output=True, text=True, timeout=30)

    def test_help(self):
        p = self.run_script("--help")
        self.assertEqual(p.returncode, 0)
        for w in ("connect8", "establish", "persistent64", "tpcb", "bulkselect", "--quick", "--pool-mode"):
            self.assertIn(w, p.stdout)

    def test_bad_arguments(self):
        for args, msg in ((["--bogus"], "unknown option"), (["--rounds", "0"], "not a positive integer"),
                          (["--workloads", "connect,nope"], "unknown value 'nope'"),
                          (["--transports", "udp"], "unknown value 'udp'"), (["--cert", "dsa"], "--cert"),
                          (["--time"], "needs a value")):
            p = self.run_script(*args)
            self.assertEqual(p.returncode, 1, args)
            self.assertIn(msg, p.stderr, args)


if __name__ == "__main__":
    unittest.main()
