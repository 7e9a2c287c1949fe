-- pgbench/run "bulkselect" workload: the whole of pgbench_accounts as one result.
SELECT * FROM pgbench_accounts;
