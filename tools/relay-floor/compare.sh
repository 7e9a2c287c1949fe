#!/bin/bash
# Interleaved pgbench runs against several targets; median tps and each
# target's CPU per transaction (its /proc/PID/schedstat run time over the
# transactions pgbench reports), and both against the target named
# "pgbouncer" when there is one.
#
# usage: compare.sh ROUNDS "name:pid:host:port ..." [pgbench args]
#   pid 0: no CPU figure (direct PostgreSQL).
#   e.g. compare.sh 3 "direct:0:/tmp/pg:5432 pgbouncer:$PB:/tmp/pgb:6432 uring:$U:/tmp/rf:25001" -S -c 64 -j 2 -T 6
# Needs PGPASSWORD (or trust) for the role in PGUSER, and the database in PGDATABASE.
set -euo pipefail
rounds=$1; targets=$2; shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
runtime() { if [ "$1" = 0 ]; then echo 0; else awk '{print $1}' "/proc/$1/schedstat"; fi; }
for _ in $(seq "$rounds"); do
  for t in $targets; do
    IFS=: read -r name pid host port <<< "$t"
    t0=$(runtime "$pid")
    res=$(pgbench -h "$host" -p "$port" -n "$@" 2>&1)
    t1=$(runtime "$pid")
    n=$(awk '/actually processed/ {split($NF, a, "/"); print a[1]}' <<< "$res")
    tps=$(awk '/^tps/ {print $3}' <<< "$res")
    if [ -z "$n" ] || [ -z "$tps" ]; then echo "$name: pgbench failed:" >&2; echo "$res" >&2; exit 1; fi
    echo "$name $tps $(( (t1 - t0) / n ))" >> "$out"
  done
done
python3 - "$out" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
names = list(dict.fromkeys(r[0] for r in rows))
med = {n: (st.median(float(r[1]) for r in rows if r[0] == n),
           st.median(float(r[2]) for r in rows if r[0] == n) / 1000) for n in names}
base = med.get("pgbouncer")
for n in names:
    tps, cpu = med[n]
    rel = ""
    if base and cpu > 0:
        rel = " | vs PgBouncer tps %.2fx cpu %.2fx" % (tps / base[0], cpu / base[1])
    print("%-10s tps %8.0f  cpu %6.2f us/txn%s" % (n, tps, cpu, rel))
PY
