-- Ordinary statements, many with session-state words in them, which leave
-- nothing behind and should pin nothing.

-- @@
SELECT 1
-- @@
select * from t
-- @@
SELECT a, "set", local, session, temp, listen, reset FROM t
-- @@
UPDATE t SET a = a + 0 WHERE id = 1
-- @@
UPDATE t SET "set" = 'x' WHERE id = 1
-- @@
UPDATE t SET local = 1, session = 2, temp = 3 WHERE id = 2
-- @@
UPDATE t SET (a, b) = (1, 'one') WHERE id = 1
-- @@
UPDATE t AS x SET listen = 'LISTEN' WHERE x.id = 1
-- @@
UPDATE t SET reset = 'all' WHERE false
-- @@
UPDATE ONLY t SET a = 1 WHERE false
-- @@
UPDATE t SET b = 'SET search_path = oracle_s' WHERE false
-- @@
INSERT INTO t (id, a, "set") VALUES (500, 10, 'SET search_path = x')
-- @@ # a serial column's nextval leaves currval behind (reported only)
INSERT INTO t (a) VALUES (3)
-- @@
INSERT INTO t (a) SELECT 1 WHERE false
-- @@
INSERT INTO t (id, a) VALUES (1000, 1) ON CONFLICT (id) DO UPDATE SET a = excluded.a
-- @@
INSERT INTO t (id, a) VALUES (1001, 1) ON CONFLICT DO NOTHING
-- @@
DELETE FROM t WHERE a = -1
-- @@
WITH u AS (UPDATE t SET a = a WHERE false RETURNING *) SELECT * FROM u
-- @@
MERGE INTO t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET a = t.a
-- @@
SELECT * FROM t FOR UPDATE
-- @@
BEGIN; SELECT * FROM t FOR SHARE; COMMIT
-- @@
BEGIN; LOCK TABLE t IN ACCESS SHARE MODE; COMMIT
-- @@ error
LOCK TABLE t
-- @@
VALUES (1), (2)
-- @@
TABLE t
-- @@
SELECT now(), current_timestamp, current_user, session_user
-- @@
SELECT pg_sleep(0)
-- @@
ANALYZE t
-- @@
VACUUM t
-- @@
EXPLAIN ANALYZE SELECT * FROM t
-- @@
EXPLAIN (ANALYZE, BUFFERS) UPDATE t SET a = a WHERE false
-- @@
CREATE TABLE oracle_perm2 (set int, local int, temp int); DROP TABLE oracle_perm2
-- @@
CREATE TABLE oracle_kw (load int, listen int, prepare int, discard int); DROP TABLE oracle_kw
-- @@
ALTER TABLE t ALTER COLUMN b SET DEFAULT 'x'
-- @@
ALTER TABLE t ALTER COLUMN b DROP DEFAULT
-- @@
ALTER TABLE t SET (fillfactor = 90)
-- @@
ALTER TABLE t RESET (fillfactor)
-- @@
ALTER ROLE oracle_user SET search_path = oracle_s
-- @@
ALTER ROLE oracle_user RESET search_path
-- @@
ALTER ROLE oracle_user IN DATABASE harbor_test SET work_mem = '8MB'; ALTER ROLE oracle_user IN DATABASE harbor_test RESET ALL
-- @@
ALTER FUNCTION oracle_scoped() SET work_mem = '2MB'
-- @@
ALTER FUNCTION oracle_scoped() RESET ALL
-- @@
COMMENT ON TABLE t IS 'SET search_path = oracle_s'
-- @@
GRANT SELECT ON t TO oracle_user
-- @@
REVOKE INSERT ON t FROM oracle_user
-- @@
CREATE INDEX IF NOT EXISTS t_a_idx ON t (a)
-- @@
SELECT 'a' LIKE 'a%', 'x' ~ 'x', 'y' SIMILAR TO 'y'
-- @@
SELECT '{1,2}'::int[], ARRAY[1,2] @> ARRAY[1]
-- @@
SELECT 1::text || 'SET'
-- @@
SELECT 'settings' AS set_config
-- @@
SELECT 1 AS set_config
-- @@
SELECT x.set_config FROM (SELECT 1 AS set_config) x
-- @@
SELECT count(*) AS pg_advisory_lock FROM t
-- @@
CHECKPOINT
-- @@
BEGIN; SAVEPOINT s1; RELEASE s1; COMMIT
-- @@
BEGIN; SAVEPOINT s1; ROLLBACK TO s1; COMMIT
-- @@ error
SAVEPOINT s2
-- @@ # left open: the harness commits
BEGIN
-- @@
BEGIN; SELECT 1
-- @@
COMMIT
-- @@
ROLLBACK
-- @@
ABORT
-- @@
END
-- @@
BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT 1; COMMIT
-- @@
START TRANSACTION READ ONLY; SELECT 1; COMMIT
-- @@ error # a failed transaction block: the harness rolls back
BEGIN; SELECT 1/0
-- @@
SELECT txid_current()
-- @@
SELECT pg_backend_pid()
-- @@
SELECT * FROM pg_stat_activity WHERE pid = pg_backend_pid()
-- @@
SHOW TIME ZONE
-- @@
SHOW TRANSACTION ISOLATION LEVEL
-- @@
SHOW session_authorization
-- @@
COPY (SELECT 1) TO STDOUT
-- @@
COPY t TO STDOUT WITH (FORMAT csv)
-- @@
SELECT setseed(0.5)
-- @@
SELECT pg_stat_clear_snapshot()
-- @@
SELECT 1 WHERE 'SET' = 'LISTEN'
-- @@
SELECT length($$x$$), length('y')
-- @@
SELECT format('%s', 'SET x = 1')
