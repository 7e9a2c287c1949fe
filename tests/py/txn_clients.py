"""Python clients through pgharbor in transaction pooling (tests/txn_clients.rs).

    python3 txn_clients.py psycopg CONNINFO TABLE WORKERS TXNS
    python3 txn_clients.py asyncpg SOCKET_DIR PORT USER PASSWORD DB TABLE WORKERS TXNS

Each worker has its own connection and runs TXNS transactions that insert
(worker, n) into TABLE and count the worker's rows, with server-side
prepared statements (psycopg: prepare_threshold=0; asyncpg: its statement
cache and explicit prepare), so its statements must follow it from backend
to backend. Prints "ok ..." and exits 0, or prints every failure and exits 1.
"""

import asyncio
import sys
import threading


def run_psycopg(conninfo, table, workers, txns):
    import psycopg

    errors = []
    seen_pooler_names = []

    def worker(w):
        try:
            with psycopg.connect(conninfo, autocommit=True, prepare_threshold=0) as conn:
                for n in range(txns):
                    with conn.transaction():
                        conn.execute(
                            f"INSERT INTO {table}(client, n) VALUES (%s, %s)", (w, n)
                        )
                        cnt = conn.execute(
                            f"SELECT count(*) FROM {table} WHERE client = %s", (w,)
                        ).fetchone()[0]
                        if cnt != n + 1:
                            errors.append(f"worker {w}, transaction {n}: count {cnt}")
                    v = conn.execute("SELECT %s::int * 2", (n,)).fetchone()[0]
                    if v != 2 * n:
                        errors.append(f"worker {w}: {n} * 2 = {v}")
                # The statements were prepared server-side, under the pooler's names.
                names = conn.execute(
                    "SELECT name FROM pg_prepared_statements WHERE statement LIKE %s",
                    (f"INSERT INTO {table}%",),
                    prepare=False,
                ).fetchall()
                seen_pooler_names.extend(r[0] for r in names)
        except Exception as e:  # noqa: BLE001 - reported to the Rust test
            errors.append(f"worker {w}: {e!r}")

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not seen_pooler_names or not all(n.startswith("PGHARBOR_") for n in seen_pooler_names):
        errors.append(f"prepared statement names on the backends: {seen_pooler_names!r}")
    return errors


def run_asyncpg(host, port, user, password, db, table, workers, txns):
    import asyncpg

    errors = []

    async def worker(w):
        try:
            conn = await asyncpg.connect(
                host=host, port=port, user=user, password=password, database=db, ssl=False
            )
            try:
                ins = await conn.prepare(f"INSERT INTO {table}(client, n) VALUES ($1, $2)")
                count = await conn.prepare(f"SELECT count(*) FROM {table} WHERE client = $1")
                for n in range(txns):
                    async with conn.transaction():
                        await ins.fetch(w, n)
                        cnt = await count.fetchval(w)
                        if cnt != n + 1:
                            errors.append(f"worker {w}, transaction {n}: count {cnt}")
                    # The statement cache: a named statement per query text.
                    v = await conn.fetchval("SELECT $1::int * 2", n)
                    if v != 2 * n:
                        errors.append(f"worker {w}: {n} * 2 = {v}")
                    rows = await conn.fetch("SELECT g FROM generate_series(1, $1::int) g", n % 5 + 1)
                    if [r["g"] for r in rows] != list(range(1, n % 5 + 2)):
                        errors.append(f"worker {w}: generate_series gave {rows!r}")
            finally:
                await conn.close()
        except Exception as e:  # noqa: BLE001 - reported to the Rust test
            errors.append(f"worker {w}: {e!r}")

    async def main():
        await asyncio.gather(*(worker(w) for w in range(workers)))

    asyncio.run(main())
    return errors


def main(argv):
    kind = argv[1]
    if kind == "psycopg":
        conninfo, table, workers, txns = argv[2], argv[3], int(argv[4]), int(argv[5])
        errors = run_psycopg(conninfo, table, workers, txns)
    elif kind == "asyncpg":
        host, port, user, password, db, table = argv[2:8]
        workers, txns = int(argv[8]), int(argv[9])
        errors = run_asyncpg(host, int(port), user, password, db, table, workers, txns)
    else:
        print(f"unknown client {kind!r}", file=sys.stderr)
        return 2
    if errors:
        for e in errors:
            print(e)
        return 1
    print(f"ok {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
