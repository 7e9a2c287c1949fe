-- pgbench/run "establish" workload: no SQL, only a meta-command, so with -C each
-- transaction is connect + authenticate + disconnect.
\set x 1
