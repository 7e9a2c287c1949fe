//! The Prometheus endpoint (`admin.metrics_listen`): `GET /metrics` in the
//! Prometheus text format (0.0.4), with the overhead report's figures, the
//! pools, the clients, the per-database counters of SHOW STATS and the
//! process; and `GET /health` for a load balancer (200 `ok` while clients
//! are accepted, 503 while shutting down or with every pool paused; see
//! [`health`]).
//!
//! Nothing is counted here: a
//! [`Collector`](prometheus_client::collector::Collector) copies the
//! pooler's state out at scrape time (the stats snapshot, the pool and
//! client registries), so the hot path pays nothing for the endpoint being
//! on. prometheus-client does the encoding, hyper the HTTP.
//!
//! `auth` is the client's authentication method (`trust`, `peer`,
//! `password`, `md5`, `scram-sha-256`, `scram-sha-256-plus`, `cert`), empty
//! on server series and on logins that failed before a method was settled.
//!
//! | metric | type | labels | meaning |
//! | --- | --- | --- | --- |
//! | `pgharbor_client_logins_total` | counter | transport, tls, auth | client logins that reached a session |
//! | `pgharbor_client_login_failures_total` | counter | transport, tls, auth | clients that did not get as far as a session |
//! | `pgharbor_client_login_phase_seconds` | histogram | transport, tls, auth, phase | client establishment phases: first_packet, tls_handshake, auth, backend_wait, first_ready, total |
//! | `pgharbor_server_connects_total` | counter | transport, tls | backend connections opened |
//! | `pgharbor_server_connect_failures_total` | counter | transport, tls | backend connections that failed to open |
//! | `pgharbor_server_connect_phase_seconds` | histogram | transport, tls, phase | backend establishment phases: connect, tls_handshake, auth, first_ready, total |
//! | `pgharbor_server_logins_served` | histogram | transport, tls | client logins a backend served before it was closed |
//! | `pgharbor_transfer_bytes_total` | counter | side, transport, tls, auth, direction | bytes relayed; direction `in` = client → server, `out` = server → client |
//! | `pgharbor_transfer_exchanges_total` | counter | side, transport, tls, auth, kind | request/response exchanges (a request up to its ReadyForQuery); kind `bulk` = a response of at least 1 MiB, else `chatty` |
//! | `pgharbor_transfer_bytes_by_kind_total` | counter | side, transport, tls, auth, kind | response bytes of those exchanges |
//! | `pgharbor_transfer_busy_seconds_total` | counter | side, transport, tls, auth, kind | time those exchanges had data in flight (throughput = bytes_by_kind / busy_seconds) |
//! | `pgharbor_client_logins_all_total` | counter | | client logins in all |
//! | `pgharbor_backend_handshakes_avoided_total` | counter | | client logins served by a backend an earlier client had used |
//! | `pgharbor_backend_handshake_time_saved_seconds` | gauge | | handshakes avoided × mean backend `total` phase (an estimate: it can dip when the mean does, so it is a gauge) |
//! | `pgharbor_pool_servers` | gauge | database, user, state | open backends: `active` (lent to a client), `idle`, `used` (being reset) |
//! | `pgharbor_pool_max_servers` | gauge | database, user | the pool's size limit |
//! | `pgharbor_pool_clients_waiting` | gauge | database, user | clients waiting for a backend |
//! | `pgharbor_pool_paused` | gauge | database, user | 1 while PAUSEd |
//! | `pgharbor_pool_maxwait_seconds` | gauge | database, user | how long the oldest client still waiting for a backend has waited (SHOW POOLS `maxwait`; 0 when none waits) |
//! | `pgharbor_clients` | gauge | state | logged-in clients: negotiating, authenticating, waiting, active, idle, closing |
//! | `pgharbor_database_transactions_total` | counter | database | transactions completed: a ReadyForQuery saying idle ends one (SHOW STATS `total_xact_count`) |
//! | `pgharbor_database_queries_total` | counter | database | queries: client requests answered, one per ReadyForQuery relayed (SHOW STATS `total_query_count`) |
//! | `pgharbor_database_transaction_seconds_total` | counter | database | time of those transactions, idle in transaction included (`total_xact_time`) |
//! | `pgharbor_database_query_seconds_total` | counter | database | time of those queries (`total_query_time`) |
//! | `pgharbor_database_wait_seconds_total` | counter | database | time clients waited for a backend (`total_wait_time`) |
//! | `pgharbor_build_info` | gauge | version | always 1: the build that is running |
//! | `pgharbor_tls_certificate_expiry_seconds` | gauge | | notAfter of the certificate shown to clients, as Unix time (read at start and reload; no sample without a certificate) |
//! | `process_resident_memory_bytes` | gauge | | resident memory (`/proc/self/statm`) |
//! | `process_open_fds` | gauge | | open file descriptors (`/proc/self/fd`) |
//! | `process_cpu_seconds_total` | counter | | user + system CPU time (getrusage) |
//!
//! Label values: `transport` is `unix`, `tcp-loopback` or `tcp`; `tls` is
//! `true` or `false`; `side` is `client` or `server` (transfer is counted on
//! both: a server series is the traffic of sessions on backends of that
//! class). A class appears once a connection of it has been seen.
//!
//! Histograms are converted from the hdrhistogram the stats keep (1 %
//! precision): a value is put in the first bucket whose bound is at least
//! the lowest value it is equivalent to, and `_sum` adds each recorded value
//! at the histogram's precision.
//!
//! Layout: `http` serves the endpoint (routing, health, shutdown),
//! `collect` reads the pooler's state at scrape time and turns it into
//! metric families, `runtime` adds the per-database, build, certificate and
//! process families, `process` reads the process's figures, `encode` writes
//! families and converts histograms.

mod collect;
mod encode;
mod http;
mod process;
mod runtime;

pub use collect::Metrics;
pub use http::{health, serve, serve_on};
