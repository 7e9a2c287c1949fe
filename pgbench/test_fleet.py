"""Unit tests for pgbench/fleet.py's pure parts (in harbor_fleet/): CPU per
unit, the round order, paired ratios and differences, percentiles, pgbench's
per-transaction log, the takeover window, stderr counts and the generated
configs.
Run with: python3 -m unittest pgbench/test_fleet.py (scripts/test.sh runs
every pgbench/test_*.py with unittest discover)."""

import io
import os
import sys
import unittest
from contextlib import redirect_stderr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harbor_fleet import cli, configs, figures, proxy, scaling, takeover  # noqa: E402


def row(cell, rnd, **figures):
    return dict(cell=cell, round=str(rnd), **{k: str(v) for k, v in figures.items()})


class Arithmetic(unittest.TestCase):
    def test_us_per_converts_ticks_and_refuses_zero_units(self):
        self.assertAlmostEqual(figures.us_per(50, 100, 10000), 50.0)
        self.assertIsNone(figures.us_per(50, 100, 0))
        self.assertIsNone(figures.us_per(50, 100, None))

    def test_cell_order_reverses_even_rounds(self):
        self.assertEqual(figures.cell_order("ab", 1), ["a", "b"])
        self.assertEqual(figures.cell_order("ab", 2), ["b", "a"])

    def test_paired_ratios_and_differences_use_rounds_both_cells_have(self):
        rows = [row("2x", 1, tps=200), row("1x", 1, tps=100), row("2x", 2, tps=150),
                row("1x", 2, tps=100), row("2x", 3, tps=90), row("1x", 3, tps="")]
        self.assertEqual(figures.paired(rows, "2x", "1x", "tps"), [2.0, 1.5])
        self.assertEqual(figures.paired(rows, "2x", "1x", "tps", op="diff"), [100.0, 50.0])
        self.assertEqual(figures.cell_median(rows, "2x", "tps"), 150.0)
        self.assertIsNone(figures.cell_median(rows, "3x", "tps"))

    def test_paired_orders_rounds_numerically(self):
        rows = [row(c, r, x=v) for r in (2, 10) for c, v in (("a", r), ("b", 1))]
        self.assertEqual(figures.paired(rows, "a", "b", "x"), [2.0, 10.0])

    def test_percentile_is_nearest_rank(self):
        xs = list(range(1, 101))
        self.assertEqual(figures.percentile(xs, 99), 99)
        self.assertEqual(figures.percentile(xs, 100), 100)
        self.assertEqual(figures.percentile([5], 99), 5)
        self.assertIsNone(figures.percentile([], 99))

    def test_fmt_range(self):
        self.assertEqual(figures.fmt_range([1.0, 1.2, 0.9], suffix="x"), "1.00x (0.90 to 1.20)")
        self.assertEqual(figures.fmt_range([]), "-")
        self.assertEqual(figures.fmt(None), "-")


class TakeoverLog(unittest.TestCase):
    def test_parse_txlog_line(self):
        start, end, lat, failed = takeover.parse_txlog_line("3 120 2500 0 1700000000 500000\n")
        self.assertAlmostEqual(end, 1700000000.5)
        self.assertAlmostEqual(start, 1700000000.4975)
        self.assertEqual((lat, failed), (2500, False))

    def test_parse_txlog_failed_skipped_and_short_lines(self):
        self.assertEqual(takeover.parse_txlog_line("1 7 failed 0 1700000000 0")[2:], (None, True))
        self.assertIsNone(takeover.parse_txlog_line("1 7 skipped 0 1700000000 0"))
        self.assertIsNone(takeover.parse_txlog_line("garbage"))

    def test_window_takes_transactions_in_flight(self):
        txs = [(0.0, 0.5, 500000, False),   # before
               (0.9, 1.1, 200000, False),   # started before, ended inside
               (1.5, 1.6, 100000, False),   # inside
               (1.9, 2.5, 600000, False),   # started inside, ended after
               (2.1, 2.2, 100000, False)]   # after
        inside, rest = takeover.split_window(txs, 1.0, 2.0)
        self.assertEqual([t[0] for t in inside], [0.9, 1.5, 1.9])
        self.assertEqual([t[0] for t in rest], [0.0, 2.1])
        self.assertEqual(takeover.latency_stats(inside), (3, 600.0, 600.0))

    def test_latency_stats_counts_failed_without_latency(self):
        n, p99, worst = takeover.latency_stats([(1.0, 1.0, None, True)])
        self.assertEqual((n, p99, worst), (1, None, None))

    def test_per_second_and_the_takeover_second_against_the_others(self):
        txs = [(0, 0.2 + s + i / 100, 1, False) for s, n in enumerate((3, 10, 10, 5, 10, 10, 2)) for i in range(n)]
        secs = takeover.per_second(txs, 0.0)
        self.assertEqual(secs, {0: 3, 1: 10, 2: 10, 3: 5, 4: 10, 5: 10, 6: 2})
        self.assertAlmostEqual(takeover.window_tps_ratio(secs, 3), 0.5)
        self.assertEqual(takeover.window_tps_ratio(secs, 9), 0.0)

    def test_stderr_counts(self):
        err = ("pgbench: error: client 3 aborted in command 4 (SQL) of script 0; FATAL: terminating\n"
               "pgbench: error: connection to server at \"127.0.0.1\", port 23440 failed: Connection refused\n"
               "pgbench: error: client 5 aborted while establishing connection\n"
               "pgbench: error: Run was aborted; the above results are incomplete.\n")
        self.assertEqual(takeover.aborted_clients(err), 2)
        self.assertEqual(takeover.connection_errors(err), 1)


class Configs(unittest.TestCase):
    def test_harbor_config_in_a_fleet_with_proxy_protocol(self):
        text = configs.harbor_config(23440, "/t/a", 2, {2: ("/t/a", 23440), 3: ("/t/b", 23441)}, "transaction", 10,
                                   "/t/userlist.txt", "host=/t/pg port=1 dbname=bench", ["127.0.0.1/32"])
        self.assertIn("port = 23440\n", text)
        self.assertIn("instance_id = 2\n", text)
        self.assertIn('proxy_protocol_from = ["127.0.0.1/32"]\n', text)
        self.assertIn('mode = "transaction"\ndefault_pool_size = 10\n', text)
        self.assertIn('[peers]\n2 = "host=/t/a port=23440"\n3 = "host=/t/b port=23441"\n', text)

    def test_harbor_config_alone_has_no_fleet_keys(self):
        text = configs.harbor_config(1, "/s", 0, None, "session", 64, "/u", "host=/p")
        for key in ("instance_id", "proxy_protocol_from", "[peers]"):
            self.assertNotIn(key, text)

    def test_haproxy_config(self):
        text = configs.haproxy_config([("two", 100, [("a", 101, False), ("b", 102, True)])])
        self.assertIn("    mode tcp\n", text)
        self.assertIn("frontend fe_two\n    bind 127.0.0.1:100\n    default_backend be_two\n", text)
        self.assertIn("    balance leastconn\n    server a 127.0.0.1:101\n    server b 127.0.0.1:102 send-proxy-v2\n",
                      text)
        self.assertNotIn(" check", text)


class Summary(unittest.TestCase):
    def test_proxy_section_states_the_difference_per_login(self):
        rows = [dict(part="proxy", **row(c, r, pooler_us_per_tx=v, haproxy_us_per_tx=10, tps=1000, tx=20000))
                for r in (1, 2) for c, v in (("send-proxy-v2", 105 + r), ("plain", 100))]
        text = "\n".join(proxy.proxy_section(rows))
        self.assertIn("send-proxy-v2 minus plain: 6.5 µs (medians); paired per round 6.5 µs (6.0 to 7.0). "
                      "HAProxy, the same difference: paired 0.0 µs (0.0 to 0.0)", text)
        self.assertIn("One clock tick is 0.50 µs per login", text)

    def test_fleet_section_has_a_paired_row_per_client_count(self):
        rows = [dict(part="fleet", mode="transaction", **row(f"{n}x-c32", 1, tps=t, latency_ms=1,
                                                              pooler_us_per_tx=u, haproxy_us_per_tx=5))
                for n, t, u in ((1, 100, 40), (2, 150, 30))]
        text = "\n".join(scaling.fleet_section(rows, ["transaction"], [32]))
        self.assertIn("| transaction | 32 | **2 / 1, paired** | 1.50x (1.50 to 1.50) | | 0.75x (0.75 to 0.75) |", text)


    def test_takeover_section_one_row_per_run(self):
        t = dict(mode="session", connect="connect", failed_tx=0, aborted_clients=1, connection_errors=2,
                 window_tx=900, window_p99_ms=80.0, window_max_ms=150.5, rest_p99_ms=40.0, rest_max_ms=99.0,
                 window_tps_vs_median=0.58, old_exit_s=0.12, rc=0)
        text = "\n".join(takeover.takeover_section([t], 1.0, 20, 8))
        self.assertIn("at 8 s of `pgbench -n -j 2 -c 16 -T 20 -l`", text)
        self.assertIn("| session | connect | 0 | 1 | 2 | 900 | 80.00 / 150.50 | 40.00 / 99.00 | 0.58 | 0.1 | 0 |", text)


class Options(unittest.TestCase):
    def test_defaults_and_lists(self):
        a = cli.options([])
        self.assertEqual((a.rounds, a.time, a.clients, a.parts), (3, 10, [32, 64], list(cli.PARTS)))
        self.assertEqual(cli.options(["--parts", "proxy", "--clients", "16"]).clients, [16])

    def test_unknown_part_is_refused(self):
        with self.assertRaises(SystemExit), redirect_stderr(io.StringIO()):
            cli.options(["--parts", "nope"])


if __name__ == "__main__":
    unittest.main()
