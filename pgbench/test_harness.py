"""Unit tests for the harness program (pgbench/harbor_bench): the parsers over
fixture text, the Run schema, the order of the runs and the progress line.
Run with: python3 -m unittest pgbench/test_bench.py (which imports these)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harbor_bench import cli, parse, procfs, rounds  # noqa: E402
from harbor_bench.model import CSV_HEADER, INTEGER, NUMERIC, RUN_FIELDS, Run, typed  # noqa: E402
from harbor_bench.targets import SPECS, TARGET_TABLE, Target, bouncer_config, harbor_config, \
    haproxy_config  # noqa: E402
from harbor_bench import peer  # noqa: E402
from harbor_bench.util import Die  # noqa: E402

PGBENCH_C = """pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: select only>
scaling factor: 10
query mode: simple
number of clients: 1
number of threads: 1
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 4705
number of failed transactions: 0 (0.000%)
latency average = 0.425 ms
average connection time = 0.287 ms
tps = 2353.592828 (including reconnection times)
"""
PGBENCH_S = """pgbench (15.18)
number of transactions actually processed: 91234
number of failed transactions: 3 (0.003%)
latency average = 0.351 ms
initial connection time = 12.502 ms
tps = 45612.771120 (without initial connection time)
"""
PGBENCH_FAIL = """pgbench (15.18)
pgbench: error: connection to server on socket "/x/.s.PGSQL.1" failed: No such file or directory
pgbench: error: could not create connection for initialization
"""
STAT = ("4242 (pg harbor (x)) S 1 4242 4242 0 -1 4194560 1205 0 0 0 "
        "150 37 9 4 20 0 2 0 12345 1000000 2500 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0")
PROC_STAT = "cpu  1000 20 300 90000 50 7 3 11 0 0\ncpu0 500 10 150 45000 25 3 1 5 0 0\n"


class Parsers(unittest.TestCase):
    def test_pgbench_connect(self):
        r = parse.parse_pgbench(PGBENCH_C)
        self.assertEqual((r.tps, r.tx, r.failed_tx, r.latency_ms, r.conn_ms),
                         (2353.592828, 4705, 0, 0.425, 0.287))

    def test_pgbench_persistent_and_failure(self):
        r = parse.parse_pgbench(PGBENCH_S)
        self.assertEqual((r.tps, r.tx, r.failed_tx, r.conn_ms), (45612.77112, 91234, 3, 12.502))
        r = parse.parse_pgbench(PGBENCH_FAIL)
        self.assertEqual((r.tps, r.tx, r.latency_ms), (None, None, None))
        self.assertEqual(parse.first_match(PGBENCH_FAIL, "error|fatal|abort"),
                         'pgbench: error: connection to server on socket "/x/.s.PGSQL.1" failed: No such file or directory')
        self.assertEqual(parse.first_match("a\nb\n", "nothing"), "b")
        self.assertEqual(parse.first_match("", "x"), "")

    def test_copies(self):
        self.assertEqual(parse.count_copies("COPY 100000\nCOPY 100000\nCOPY 99\nCOPY 1000000\n", 100000), 2)

    def test_psql_outputs(self):
        self.assertEqual(parse.ssl_info('You are connected to database "bench" as user "bench" on host '
                                        '"127.0.0.1" at port "5" .\nSSL connection (protocol: TLSv1.3, cipher: '
                                        'TLS_AES_256_GCM_SHA384, compression: off)\n'),
                         "SSL connection (protocol: TLSv1.3, cipher: TLS_AES_256_GCM_SHA384, compression: off)")
        self.assertTrue(parse.ssl_info("no tls here").startswith("NO TLS"))
        self.assertEqual(parse.probe_vars("/tmp/s\n5432\nbench\nbench\n"),
                         {"host": "/tmp/s", "port": "5432", "user": "bench", "dbname": "bench"})
        self.assertEqual(parse.fingerprint("sha256 Fingerprint=AB:CD:EF\n"), "AB:CD:EF")

    def test_ss(self):
        ux = ('u_str LISTEN 0 128 /tmp/a/.s.PGSQL.5432 123 * 0 users:(("postgres",pid=77,fd=7))\n'
              'u_str LISTEN 0 128 /tmp/b/.s.PGSQL.6432 124 * 0 users:(("pgbouncer",pid=88,fd=9))\n')
        self.assertEqual(parse.listener_pid(ux, "/tmp/b/.s.PGSQL.6432"), 88)
        self.assertIsNone(parse.listener_pid(ux, "/tmp/c/.s.PGSQL.1"))
        self.assertEqual(parse.listener_pid('LISTEN 0 244 127.0.0.1:5432 0.0.0.0:* users:(("postgres",pid=9,fd=6))\n'), 9)

    def test_split_conninfo(self):
        e = parse.split_conninfo("host=/s port=5 user=u dbname='d b' password=x sslmode=verify-full "
                                 "hostaddr=1.2.3.4 connect_timeout=5 application_name='a b'")
        self.assertEqual((e.host, e.port, e.user, e.dbname, e.password), ("/s", "5", "u", "d b", "x"))
        self.assertEqual(e.rest, "connect_timeout=5 application_name='a b'")
        self.assertEqual(parse.split_conninfo(""), parse.Endpoint())
        self.assertEqual(parse.toml_quote('a"b\\'), '"a\\"b\\\\"')


class ProcFs(unittest.TestCase):
    def test_stat(self):
        self.assertEqual(procfs.stat_state(STAT), "S")
        self.assertEqual(procfs.stat_ticks(STAT), 187)
        self.assertEqual(procfs.stat_ticks(STAT, children=True), 200)

    def test_machine_and_status(self):
        self.assertEqual(procfs.busy_ticks(PROC_STAT), 1000 + 20 + 300 + 7 + 3)
        self.assertEqual(procfs.rss_kib("Name:\tx\nVmRSS:\t   12272 kB\n"), 12272)
        self.assertIsNone(procfs.rss_kib("Name:\tx\n"))
        self.assertEqual(procfs.open_files_limit("Max open files            4096                 524288               files\n"),
                         "4096")
        self.assertEqual(procfs.cpu_model("processor\t: 0\nmodel name\t: AMD EPYC\n"), "AMD EPYC")

    def test_live_process(self):
        self.assertTrue(procfs.alive(os.getpid()))
        self.assertFalse(procfs.alive(None))
        self.assertGreaterEqual(procfs.ticks(os.getpid()), 0)
        self.assertEqual(procfs.ticks(None), 0)


class Schema(unittest.TestCase):
    def test_columns(self):
        self.assertEqual(len(RUN_FIELDS), 27)
        self.assertEqual(CSV_HEADER.split(",")[:4], ["round", "workload", "transport", "target"])
        self.assertIn("tps", NUMERIC)
        self.assertIn("bytes", INTEGER)
        self.assertNotIn("status", NUMERIC)

    def test_row(self):
        r = Run(round=1, workload="connect", transport="unix", target="pgharbor", command='say "hi"\nthere',
                load1_before=0.5, ncpu=2, other_cpus=-0.051, status="ok", rc=0, tps=2353.592828, tx=4705,
                wall_s=1.3425, pool_mode="session")
        line = r.csv_fields()
        self.assertEqual(len(line.split(",")), 27)
        self.assertTrue(line.startswith("1,connect,unix,pgharbor,\"say 'hi' there\",,0.50,2,-0.05,\"\",\"ok\",0,"
                                        "2353.592828,4705,,,,1.343,"))
        self.assertTrue(line.endswith(",session"))
        back = typed(dict(zip(RUN_FIELDS, "1,a,b,c,d,e,0.5,2,,f,ok,0,9.5,10,,,,,,,,,,,,,x".split(","))))
        self.assertEqual((back["round"], back["tps"], back["tx"], back["failed_tx"]), (1, 9.5, 10, None))


class Order(unittest.TestCase):
    def targets(self, names):
        return [Target(SPECS[n], serves=list(SPECS[n].transports or ("unix", "tcp", "tcp-tls"))) for n in names]

    def test_interleaved_reversed_in_even_rounds(self):
        s = cli.resolve(["--quick", "--workloads", "connect,bulk", "--transports", "unix,tcp-tls", "--rounds", "2",
                         "--cert", "both", "--skip", "pgbouncer"])
        gs = self.targets(["direct", "pgharbor", "pgharbor-base", "pgharbor-notls"])
        cells = rounds.plan(s, gs, "ecdsa")
        self.assertEqual(cells[0], (1, "connect", "unix", ["direct", "pgharbor", "pgharbor-base", "pgharbor-notls"]))
        self.assertEqual(cells[1], (1, "connect", "tcp-tls-ecdsa", ["direct", "pgharbor", "pgharbor-base"]))
        self.assertEqual(cells[2][2], "tcp-tls-rsa")
        # bulk starts on the certificate served last, and pgharbor-notls only runs logins
        self.assertEqual([c[2] for c in cells[3:6]], ["unix", "tcp-tls-rsa", "tcp-tls-ecdsa"])
        self.assertEqual(cells[3][3], ["direct", "pgharbor", "pgharbor-base"])
        self.assertEqual(cells[6], (2, "connect", "unix", ["pgharbor-notls", "pgharbor-base", "pgharbor", "direct"]))
        # plain transports before TLS cells in every workload
        for rnd, w in {(c[0], c[1]) for c in cells}:
            ts = [c[2] for c in cells if (c[0], c[1]) == (rnd, w)]
            self.assertEqual(ts[0], "unix")

    def test_table_order(self):
        self.assertEqual([s.name for s in TARGET_TABLE],
                         ["direct", "pgharbor", "pgharbor-base", "pgbouncer", "pgharbor-notls", "pooler",
                          "haproxy"])

    def test_progress(self):
        self.assertEqual(rounds.progress(3, 12, 90.0, 30, 120), "cell 3/12, 1:30 elapsed, about 4:30 left")
        self.assertEqual(rounds.fmt_duration(3725), "1:02:05")

    def test_conninfo(self):
        t = Target(SPECS["pgharbor"], sock="/t/h", host="127.0.0.1", port="6", user="u", db="my db")
        self.assertEqual(t.conninfo("unix"), "user=u dbname='my db' host=/t/h port=6")
        self.assertEqual(t.conninfo("tcp-tls-rsa"), "user=u dbname='my db' host=127.0.0.1 port=6 sslmode=require")
        t.serves = ["unix", "tcp", "tcp-tls"]
        self.assertTrue(t.runs("tcp-tls-ecdsa", "bulk"))
        n = Target(SPECS["pgharbor-notls"], serves=["unix"])
        self.assertEqual((n.runs("unix", "connect"), n.runs("unix", "bulk"), n.runs("tcp")), (True, False, False))

    def test_haproxy_runs_in_the_persistent_cells_only(self):
        x = Target(SPECS["haproxy"], serves=["unix", "tcp"])
        self.assertEqual([x.runs("tcp", w) for w in ("persistent", "persistent64", "tpcb", "tpcb8")], [True] * 4)
        self.assertEqual([x.runs("unix", w) for w in ("connect", "connect8", "establish", "bulk", "bulkselect")],
                         [False] * 5)
        self.assertFalse(x.runs("tcp-tls-ecdsa", "persistent"))
        self.assertTrue(cli.resolve(["--workloads", "connect,tpcb64"]).haproxy)
        self.assertFalse(cli.resolve(["--workloads", "connect,establish"]).haproxy)
        self.assertFalse(cli.resolve(["--workloads", "persistent", "--transports", "tcp-tls"]).haproxy)
        self.assertFalse(cli.resolve(["--workloads", "persistent", "--skip", "haproxy"]).haproxy)


def fake_harness(transports):
    """What the config writers read of the harness, for the targets of a throwaway cluster."""
    from types import SimpleNamespace
    s = cli.resolve(["--transports", transports])
    h = SimpleNamespace(s=s, tmp="/t", ssl="/t/pg/ssl", auth_method="scram-sha-256", bench_db="bench",
                        bench_user="bench", backend_kv="host=/t/pg/sock port=5 dbname=bench")
    h.direct = Target(SPECS["direct"], user="bench", db="bench", pw="pw1")
    h.targets = {"pgharbor": Target(SPECS["pgharbor"], sock="/t/harbor", port="6"),
                 "pgbouncer": Target(SPECS["pgbouncer"], sock="/t/pgbouncer", port="7")}
    return h


class PeerCell(unittest.TestCase):
    """The unix-peer cell: what each target is given, and how its clients run."""

    def test_transports(self):
        self.assertEqual(cli.resolve([]).transports, ["unix", "unix-peer", "tcp", "tcp-tls-ecdsa"])
        self.assertEqual(cli.resolve(["--profile", "txpool"]).transports, ["unix", "tcp"])
        s = cli.resolve(["--pg", "host=/tmp"])  # not our pg_hba.conf: dropped from the default list
        self.assertEqual((s.transports, s.peer), (["unix", "tcp", "tcp-tls-ecdsa"], False))
        with self.assertRaisesRegex(Die, "needs the throwaway PostgreSQL"):
            cli.resolve(["--pg", "host=/tmp", "--transports", "unix,unix-peer"])

    def test_postgres_hba(self):
        self.assertEqual(peer.postgres_hba(True),
                         "local all postgres trust\nlocal all bench_peer peer\nlocal all all scram-sha-256\n"
                         "host all all 127.0.0.1/32 scram-sha-256\n")
        self.assertEqual(peer.postgres_hba(False),
                         "local all postgres trust\nlocal all all scram-sha-256\n"
                         "host all all 127.0.0.1/32 scram-sha-256\n")
        self.assertEqual(peer.role_sql(), "CREATE ROLE bench_peer LOGIN;\nGRANT bench TO bench_peer;\n")

    def test_pooler_hba(self):
        lines = peer.pooler_hba("scram-sha-256").splitlines()
        self.assertTrue(lines[0].startswith("#"))
        self.assertEqual(lines[1:], ["local all bench_peer peer", "local all all scram-sha-256",
                                     "host all all 127.0.0.1/32 scram-sha-256"])

    def test_bouncer_userlist(self):
        # PgBouncer must know the user; the secret is of a password nobody has
        line = peer.bouncer_userlist_line()
        self.assertRegex(line, r'^"bench_peer" "SCRAM-SHA-256\$16:[^"]+"\n$')
        self.assertNotEqual(line, peer.bouncer_userlist_line())

    def test_pgharbor_config(self):
        text = harbor_config(fake_harness("unix,unix-peer,tcp"), "pgharbor", "ecdsa")
        self.assertIn('[auth]\nhba_file = "/t/pgharbor-hba.conf"\nauth_file = "/t/userlist.txt"\n', text)
        self.assertNotIn("method =", text.split("[pool]")[0])
        # bench's pool for every cell: the backend user is the conninfo's user=
        self.assertIn('[databases."bench"]\nconninfo = "host=/t/pg/sock port=5 dbname=bench user=bench password=pw1"\n',
                      text)
        plain = harbor_config(fake_harness("unix,tcp"), "pgharbor", "ecdsa")
        self.assertIn('[auth]\nmethod = "scram-sha-256"\nauth_file = "/t/userlist.txt"\n', plain)
        self.assertIn('conninfo = "host=/t/pg/sock port=5 dbname=bench"\n', plain)

    def test_pgbouncer_config(self):
        text = bouncer_config(fake_harness("unix-peer"), "ecdsa")
        self.assertTrue(text.startswith("[databases]\nbench = host=/t/pg/sock port=5 dbname=bench user=bench "
                                        "password=pw1\n"))
        self.assertIn("\nauth_type = hba\nauth_hba_file = /t/pgbouncer/pgbouncer-hba.conf\n"
                      "auth_file = /t/pgbouncer/userlist.txt\n", text)
        plain = bouncer_config(fake_harness("unix"), "ecdsa")
        self.assertIn("\nauth_type = scram-sha-256\nauth_file = /t/pgbouncer/userlist.txt\n", plain)
        self.assertNotIn("hba", plain)

    def test_haproxy_config(self):
        h = fake_harness("unix,tcp")
        h.direct.sock, h.direct.host, h.direct.port = "/t/pg/sock", "127.0.0.1", "5"
        h.targets["haproxy"] = Target(SPECS["haproxy"], sock="/t/haproxy", port="8")
        text = haproxy_config(h)
        # Sized for the largest cell (the default list's persistent64), not max_client_conn.
        self.assertIn("    nbthread 1\n    maxconn 128\n", text)
        self.assertIn("    mode tcp\n", text)
        self.assertIn("    bind /t/haproxy/.s.PGSQL.8 mode 777\n    bind 127.0.0.1:8\n", text)
        self.assertIn("    server pg /t/pg/sock/.s.PGSQL.5\n", text)
        h.direct.sock = ""  # a --pg server without a socket: its TCP port
        self.assertIn("    server pg 127.0.0.1:5\n", haproxy_config(h))

    def test_client(self):
        t = Target(SPECS["pgbouncer"], sock="/t/b", host="127.0.0.1", port="7", user="bench", db="bench", pw="pw1",
                   serves=["unix", "unix-peer", "tcp"])
        self.assertEqual(t.conninfo("unix-peer"), "user=bench_peer dbname=bench host=/t/b port=7")
        self.assertEqual(t.argv("unix-peer", ["pgbench", "-C"]), ["runuser", "-u", "bench_peer", "--", "pgbench", "-C"])
        self.assertEqual(t.argv("unix", ["pgbench"]), ["pgbench"])
        self.assertNotIn("PGPASSWORD", t.env("unix-peer", PGCONNECT_TIMEOUT="5"))
        self.assertEqual(t.env("unix")["PGPASSWORD"], "pw1")
        self.assertTrue(t.runs("unix-peer", "persistent"))
        n = Target(SPECS["pgharbor-notls"], serves=["unix", "unix-peer"])
        self.assertEqual((n.runs("unix-peer", "establish"), n.runs("unix-peer", "tpcb")), (True, False))

    def test_plan(self):
        s = cli.resolve(["--quick", "--workloads", "establish", "--transports", "unix-peer,unix,tcp"])
        gs = [Target(SPECS[g], serves=["unix", "unix-peer", "tcp"] if g != "pgharbor-notls" else ["unix", "unix-peer"])
              for g in ("direct", "pgharbor", "pgbouncer", "pgharbor-notls")]
        cells = rounds.plan(s, gs, "ecdsa")
        self.assertEqual([c[2] for c in cells], ["unix", "unix-peer", "tcp"])
        self.assertEqual(cells[1][3], ["direct", "pgharbor", "pgbouncer", "pgharbor-notls"])


if __name__ == "__main__":
    unittest.main()
