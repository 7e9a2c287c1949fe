"""pgbench/run as a program: the benchmark comparing PostgreSQL direct,
pgharbor and PgBouncer (Python 3.11, standard library only).

Layout, top-down:
  cli       options, profiles and the settings they resolve to
  main      the run from start to finish, and its cleanup
  system    processes, privileges, packages, certificates
  postgres  the throwaway PostgreSQL, or one that already runs (--pg)
  targets   the target table, the poolers' configs, start/stop, certificates
  workloads the workloads' commands, and one measured run
  peer, tlsauth  the special login cells: unix-peer; tcp-tls-nocb, tcp-tls-cert
  rounds    the rounds (interleaving, TLS cells, progress), warm-up, idle memory
  report    summary.md's header and log excerpts, outputs and plots
  model     target/transport/workload names, the Run record (raw.csv schema)
  parse     pgbench, psql, openssl, ss output; connection strings
  procfs    /proc: CPU ticks, liveness, memory
  stats, summary, checks, export   the figures, tables and files from raw.csv
"""
