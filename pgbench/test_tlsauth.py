"""Unit tests of the tcp-tls-nocb and tcp-tls-cert cells (tlsauth.py): what
each target's config gets, and how the cells' clients connect."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harbor_bench import cli, peer, rounds, tlsauth  # noqa: E402
from harbor_bench.model import TRANSPORTS, cert_of  # noqa: E402
from harbor_bench.targets import SPECS, Target, bouncer_config, harbor_config  # noqa: E402
from harbor_bench.util import Die  # noqa: E402
from test_harness import fake_harness  # noqa: E402

CERT_LINE = "hostssl all bench_cert 127.0.0.1/32 cert"


class Selection(unittest.TestCase):
    def test_not_default(self):
        self.assertNotIn("tcp-tls-cert", cli.resolve([]).transports)
        self.assertNotIn("tcp-tls-nocb", cli.resolve([]).transports)

    def test_order_and_flags(self):
        s = cli.resolve(["--transports", "tcp-tls-cert,unix,tcp-tls-nocb,tcp-tls"])
        self.assertEqual(s.transports, ["unix", "tcp-tls-ecdsa", "tcp-tls-nocb", "tcp-tls-cert"])
        self.assertEqual((s.cert, s.hba, s.peer), (True, True, False))
        s = cli.resolve(["--transports", "tcp-tls-nocb"])
        self.assertEqual((s.cert, s.hba), (False, False))

    def test_cert_needs_own_pg(self):
        with self.assertRaisesRegex(Die, "needs the throwaway PostgreSQL"):
            tlsauth.check_possible(cli.resolve(["--pg", "host=/tmp", "--transports", "tcp-tls-cert"]))

    def test_labels_and_cert(self):
        self.assertEqual(TRANSPORTS["tcp-tls-nocb"], "TCP + TLS, no channel binding")
        self.assertEqual(TRANSPORTS["tcp-tls-cert"], "TCP + TLS + client certificate")
        self.assertEqual([cert_of(t) for t in ("tcp-tls-rsa", "tcp-tls-nocb", "tcp-tls-cert", "tcp")],
                         ["rsa", "ecdsa", "ecdsa", ""])

    def test_plan(self):
        s = cli.resolve(["--quick", "--workloads", "establish", "--cert", "both",
                         "--transports", "tcp,tcp-tls,tcp-tls-nocb,tcp-tls-cert"])
        gs = [Target(SPECS[g], serves=["unix", "tcp", "tcp-tls"]) for g in ("direct", "pgharbor", "pgbouncer")]
        self.assertEqual([c[2] for c in rounds.plan(s, gs, "ecdsa")],
                         ["tcp", "tcp-tls-ecdsa", "tcp-tls-rsa", "tcp-tls-nocb", "tcp-tls-cert"])


class Client(unittest.TestCase):
    def target(self, name="pgharbor"):
        return Target(SPECS[name], sock="/t/h", host="127.0.0.1", port="6", user="bench", db="bench", pw="pw1",
                      serves=["unix", "tcp", "tcp-tls"], client_cert="/t/client/bench_cert")

    def test_nocb(self):
        t = self.target()
        self.assertEqual(t.conninfo("tcp-tls-nocb"),
                         "user=bench dbname=bench host=127.0.0.1 port=6 sslmode=require channel_binding=disable")
        self.assertEqual(t.env("tcp-tls-nocb")["PGPASSWORD"], "pw1")

    def test_cert(self):
        t = self.target()
        self.assertEqual(t.conninfo("tcp-tls-cert"),
                         "user=bench_cert dbname=bench host=127.0.0.1 port=6 sslmode=require "
                         "sslcert=/t/client/bench_cert.crt sslkey=/t/client/bench_cert.key")
        self.assertNotIn("PGPASSWORD", t.env("tcp-tls-cert"))
        self.assertEqual(t.argv("tcp-tls-cert", ["pgbench"]), ["pgbench"])
        self.assertTrue(t.runs("tcp-tls-cert", "establish"))
        self.assertFalse(self.target("pooler").runs("tcp-tls-cert"))
        self.assertEqual(t.conninfo("tcp-tls-ecdsa"), "user=bench dbname=bench host=127.0.0.1 port=6 sslmode=require")


class Configs(unittest.TestCase):
    def test_postgres_hba(self):
        text = peer.postgres_hba(False, tlsauth.CERT_LINE)
        self.assertEqual(text.splitlines()[:2], ["local all postgres trust", CERT_LINE])
        self.assertEqual(peer.postgres_hba(True, tlsauth.CERT_LINE).splitlines()[1:3],
                         ["local all bench_peer peer", CERT_LINE])
        self.assertEqual(tlsauth.role_sql(), "CREATE ROLE bench_cert LOGIN;\nGRANT bench TO bench_cert;\n")

    def test_pooler_hba(self):
        lines = peer.pooler_hba("scram-sha-256", False, tlsauth.CERT_LINE).splitlines()
        self.assertTrue(lines[0].startswith("#"))
        self.assertEqual(lines[1:], [CERT_LINE, "local all all scram-sha-256", "host all all 127.0.0.1/32 scram-sha-256"])

    def test_pgharbor(self):
        text = harbor_config(fake_harness("tcp,tcp-tls-cert"), "pgharbor", "ecdsa")
        tls = text.split("[tls]")[1].split("[auth]")[0]
        self.assertIn('cert_file = "/t/pg/ssl/ecdsa.crt"', tls)
        self.assertIn('ca_file = "/t/pg/ssl/client-ca.crt"', tls)
        self.assertIn('[auth]\nhba_file = "/t/pgharbor-hba.conf"\nauth_file = "/t/userlist.txt"\n', text)
        self.assertIn('conninfo = "host=/t/pg/sock port=5 dbname=bench user=bench password=pw1"\n', text)
        # pgharbor-notls: no [tls], so the rules without the cert line (refused without tls.ca_file)
        h = fake_harness("unix,tcp-tls-cert")
        h.targets["pgharbor-notls"] = Target(SPECS["pgharbor-notls"], sock="/t/n", port="8")
        notls = harbor_config(h, "pgharbor-notls", "")
        self.assertNotIn("[tls]", notls)
        self.assertIn('hba_file = "/t/pgharbor-notls-hba.conf"', notls)
        nocb = harbor_config(fake_harness("tcp,tcp-tls-nocb"), "pgharbor", "ecdsa")
        self.assertNotIn("ca_file", nocb)
        self.assertIn('[auth]\nmethod = "scram-sha-256"', nocb)

    def test_pgbouncer(self):
        text = bouncer_config(fake_harness("tcp-tls-cert"), "ecdsa")
        self.assertTrue(text.startswith("[databases]\nbench = host=/t/pg/sock port=5 dbname=bench user=bench "
                                        "password=pw1\n"))
        self.assertIn("\nauth_type = hba\nauth_hba_file = /t/pgbouncer/pgbouncer-hba.conf\n", text)
        self.assertIn("\nclient_tls_ca_file = /t/pg/ssl/client-ca.crt\n", text)
        self.assertNotIn("client_tls_ca_file", bouncer_config(fake_harness("tcp-tls-nocb"), "ecdsa"))

    def test_bouncer_userlist(self):
        line = tlsauth.bouncer_userlist_line()
        self.assertRegex(line, r'^"bench_cert" "SCRAM-SHA-256\$16:[^"]+"\n$')
        self.assertNotEqual(line, tlsauth.bouncer_userlist_line())

    def test_client_cert_path(self):
        self.assertEqual(tlsauth.client_cert("/t"), "/t/client/bench_cert")
        self.assertEqual(tlsauth.ca_file("/t"), "/t/pg/ssl/client-ca.crt")


if __name__ == "__main__":
    unittest.main()
