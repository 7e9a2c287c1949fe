"""pgbench/fleet.py as a program: issue 17's benchmarks, pgharbor behind
HAProxy, the takeover under load, the PROXY protocol's cost per login
(Python 3.9+, standard library only; shares harbor_bench's procfs, system,
parse and stats).

Layout, top-down:
  cli       options: the parts, the pool modes, the run's sizes
  main      the run from start to finish, and its cleanup
  runtime   the Fleet: temp dir, PostgreSQL, HAProxy, pgharbors, by pid
  configs   pgharbor's TOML and HAProxy's config (pure)
  measure   one measured pgbench run with CPU per transaction, the rounds
  scaling   the fleet part: 1 against 2 pgharbors behind HAProxy
  takeover  the takeover part: pgharbor --takeover under pgbench -l
  proxy     the proxy part: send-proxy-v2 against plain, per login
  report    runs.csv, takeover.csv, takeover_seconds.csv, summary.md
  figures   ratios, medians, percentiles, formatting (pure)
"""
