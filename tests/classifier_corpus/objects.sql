-- Temporary objects, advisory locks, LISTEN, cursors WITH HOLD, SQL
-- PREPARE, LOAD and DISCARD. Advisory lock keys are unique per entry.

-- @@ # temporary tables, views, sequences
CREATE TEMP TABLE tt1 (a int)
-- @@
CREATE TEMPORARY TABLE tt2 (a int)
-- @@
create temp table tt3 as select 1 as a
-- @@
CREATE LOCAL TEMP TABLE tt4 (a int)
-- @@
CREATE GLOBAL TEMPORARY TABLE tt5 (a int)
-- @@
CREATE TEMP TABLE IF NOT EXISTS tt6 (a int)
-- @@ # dropped at commit: nothing lasts
CREATE TEMP TABLE tt7 (a int) ON COMMIT DROP
-- @@
CREATE TEMP TABLE tt8 (a int) ON COMMIT DELETE ROWS
-- @@
CREATE TEMP TABLE tt9 (a int) ON COMMIT PRESERVE ROWS
-- @@
CREATE /* c */ TEMP TABLE tt12 (a int)
-- @@
CREATE{{LF}}TEMPORARY{{LF}}TABLE tt13 (a int)
-- @@
CREATE TEMP TABLE tt14 (LIKE t)
-- @@
CREATE TEMP TABLE tt15 (a serial)
-- @@
CREATE TEMP TABLE tt16 AS SELECT * FROM t WITH NO DATA
-- @@
CREATE TEMP TABLE tt10 (a int); DROP TABLE tt10
-- @@
CREATE TEMP TABLE tt11 (a int); DISCARD TEMP
-- @@
BEGIN; CREATE TEMP TABLE tt17 (a int); ROLLBACK
-- @@
BEGIN; CREATE TEMP TABLE tt18 (a int); COMMIT
-- @@ # left open: the harness commits
BEGIN; CREATE TEMP TABLE tt19 (a int)
-- @@
SELECT 1; CREATE TEMP TABLE tt20 (a int)
-- @@
CREATE TEMP VIEW tv1 AS SELECT 1 AS a
-- @@
CREATE OR REPLACE TEMP VIEW tv2 AS SELECT 1 AS a
-- @@
CREATE OR REPLACE TEMPORARY VIEW tv3 AS SELECT 1 AS a
-- @@
CREATE TEMP RECURSIVE VIEW tv4 (n) AS VALUES (1)
-- @@
create or replace temp view tv6 as select 1 as x; select * from tv6
-- @@
CREATE TEMP TABLE tt21 (a int); CREATE VIEW tv7 AS SELECT * FROM tt21
-- @@
CREATE TEMP SEQUENCE ts1
-- @@
CREATE TEMPORARY SEQUENCE IF NOT EXISTS ts2
-- @@
CREATE TEMP SEQUENCE ts3; SELECT nextval('ts3')
-- @@ # objects in pg_temp by name
CREATE TABLE pg_temp.pt1 (a int)
-- @@
CREATE TABLE "pg_temp".pt2 (a int)
-- @@
CREATE TABLE PG_TEMP.pt3 (a int)
-- @@
CREATE TABLE U&"pg\005ftemp".pt4 (a int)
-- @@
CREATE TABLE U&"pg!005ftemp" UESCAPE '!' (a int)
-- @@
CREATE VIEW pg_temp.pv1 AS SELECT 1 AS a
-- @@
CREATE SEQUENCE pg_temp.ps1
-- @@
CREATE FUNCTION pg_temp.pf1() RETURNS int LANGUAGE sql AS 'SELECT 1'
-- @@
CREATE FUNCTION pg_temp.pf2() RETURNS int LANGUAGE sql AS 'SELECT 1'; SELECT pg_temp.pf2()
-- @@
CREATE TYPE pg_temp.pty AS (a int)
-- @@
CREATE DOMAIN pg_temp.pd AS int
-- @@
CREATE TYPE pg_temp.pe AS ENUM ('a')
-- @@
CREATE TABLE pt5 (a int); ALTER TABLE pt5 RENAME TO pt6
-- @@ error
ALTER TABLE oracle_s.t2 SET SCHEMA pg_temp
-- @@ # SELECT INTO
SELECT 1 AS a INTO TEMP ti1
-- @@
SELECT 1 AS a INTO TEMPORARY TABLE ti2
-- @@
SELECT * INTO TEMP ti3 FROM t
-- @@
WITH q AS (SELECT 1 AS a) SELECT * INTO TEMP ti4 FROM q
-- @@
SELECT 1 AS a INTO LOCAL TEMP ti5
-- @@
SELECT 1 AS a INTO LOCAL TEMPORARY TABLE ti9
-- @@
SELECT 1 AS a INTO GLOBAL TEMP ti8
-- @@
SELECT 1 AS a INTO pg_temp.ti6
-- @@
SELECT 1 AS a INTO TEMP TABLE ti7 FROM t WHERE false
-- @@
SELECT 1 AS a INTO UNLOGGED uti1
-- @@
SELECT 1 AS a INTO oracle_into1
-- @@ # EXPLAIN without ANALYZE creates nothing
EXPLAIN CREATE TEMP TABLE te2 AS SELECT 1 AS a
-- @@
EXPLAIN ANALYZE CREATE TEMP TABLE te1 AS SELECT 1 AS a
-- @@ # "temp" as a name
CREATE TABLE temp_like (a int)
-- @@
CREATE TABLE "temp2" (temp int)
-- @@
INSERT INTO temp VALUES (1)
-- @@
INSERT INTO "temp" VALUES (2)
-- @@
SELECT * FROM temp
-- @@
UPDATE temp SET a = a
-- @@
DELETE FROM temp WHERE a < 0
-- @@
SELECT temp FROM t
-- @@
SELECT 1 AS temp
-- @@
MERGE INTO temp USING (SELECT 1 AS a) s ON temp.a = s.a WHEN NOT MATCHED THEN INSERT VALUES (s.a)
-- @@
WITH x AS (INSERT INTO temp VALUES (3) RETURNING a) SELECT * FROM x
-- @@
CREATE UNLOGGED TABLE ul1 (a int)
-- @@
DISCARD TEMP
-- @@
DISCARD TEMPORARY
-- @@ # session advisory locks
SELECT pg_advisory_lock(1001)
-- @@
SELECT pg_advisory_lock(1002, 1)
-- @@
SELECT pg_advisory_lock_shared(1003)
-- @@
SELECT pg_try_advisory_lock(1004)
-- @@
SELECT pg_try_advisory_lock_shared(1005)
-- @@
SELECT pg_try_advisory_lock(1006, 2)
-- @@
select PG_ADVISORY_LOCK(1007)
-- @@
SELECT pg_catalog.pg_advisory_lock(1008)
-- @@
SELECT "pg_advisory_lock"(1009)
-- @@
SELECT pg_catalog."pg_advisory_lock"(1010)
-- @@
SELECT pg_advisory_lock /* c */ (1011)
-- @@
SELECT pg_advisory_lock{{LF}}(1012)
-- @@
SELECT * FROM pg_advisory_lock(1013)
-- @@
SELECT pg_advisory_lock(k) FROM generate_series(1014, 1016) k
-- @@
SELECT CASE WHEN true THEN pg_try_advisory_lock(1017) END
-- @@
SELECT U&"pg_advisory\005flock"(1018)
-- @@
SELECT pg_advisory_lock(1031::bigint), pg_advisory_lock_shared(1032, 5)
-- @@
WITH l AS (SELECT pg_advisory_lock(1033)) SELECT * FROM l
-- @@
SELECT 1 FROM t WHERE pg_try_advisory_lock(1034 + id)
-- @@ # a session lock survives the rollback of the transaction that took it
BEGIN; SELECT pg_advisory_lock(1028); ROLLBACK
-- @@ error
SELECT pg_advisory_lock(1029); SELECT 1/0
-- @@
SELECT pg_advisory_lock(1024); SELECT pg_advisory_unlock(1024)
-- @@
SELECT pg_advisory_lock(1025); SELECT pg_advisory_unlock_all()
-- @@ # transaction-level locks end with the transaction
SELECT pg_advisory_xact_lock(1019)
-- @@
SELECT pg_advisory_xact_lock_shared(1020)
-- @@
SELECT pg_try_advisory_xact_lock(1021)
-- @@
SELECT pg_try_advisory_xact_lock_shared(1022, 3)
-- @@
BEGIN; SELECT pg_advisory_xact_lock(1023); COMMIT
-- @@
SELECT pg_advisory_unlock(1026)
-- @@
SELECT pg_advisory_unlock_all()
-- @@
SELECT pg_advisory_unlock_shared(1027)
-- @@
SELECT 'pg_advisory_lock(1030)'
-- @@
SELECT 1 AS pg_advisory_lock
-- @@
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
-- @@ # LISTEN
LISTEN oracle_a
-- @@
listen "Oracle B"
-- @@
LISTEN oracle_c; NOTIFY oracle_c, 'hi'
-- @@
/* c */ LISTEN oracle_d
-- @@
SELECT 1; LISTEN oracle_e
-- @@
LISTEN oracle_m;{{LF}}LISTEN oracle_n
-- @@
BEGIN; LISTEN oracle_f; COMMIT
-- @@
BEGIN; LISTEN oracle_g; ROLLBACK
-- @@ # left open: the harness commits
BEGIN; LISTEN oracle_o
-- @@
LISTEN oracle_h; UNLISTEN oracle_h
-- @@
LISTEN oracle_i; UNLISTEN *
-- @@
UNLISTEN *
-- @@
UNLISTEN oracle_j
-- @@
NOTIFY oracle_k
-- @@
NOTIFY oracle_k, 'LISTEN x'
-- @@
SELECT pg_notify('oracle_l', 'LISTEN oracle_l')
-- @@
SELECT pg_listening_channels()
-- @@ error
LISTEN
-- @@ # cursors WITH HOLD outlive their transaction
DECLARE c1 CURSOR WITH HOLD FOR SELECT 1
-- @@
DECLARE c17 SCROLL CURSOR WITH HOLD FOR SELECT generate_series(1, 3)
-- @@
BEGIN; DECLARE c2 CURSOR WITH HOLD FOR SELECT * FROM t; COMMIT
-- @@
BEGIN; DECLARE c3 NO SCROLL CURSOR WITH HOLD FOR SELECT 1; COMMIT
-- @@
BEGIN; DECLARE c4 BINARY INSENSITIVE SCROLL CURSOR WITH HOLD FOR SELECT 1; COMMIT
-- @@
BEGIN; declare c5 cursor with hold for select 1; commit
-- @@
BEGIN; DECLARE c6 CURSOR WITH /* c */ HOLD FOR SELECT 1; COMMIT
-- @@
BEGIN; DECLARE "hold" CURSOR WITH HOLD FOR SELECT 1; COMMIT
-- @@
BEGIN; DECLARE hold CURSOR WITH HOLD FOR SELECT 1; COMMIT
-- @@
BEGIN; DECLARE c12 CURSOR WITH HOLD FOR SELECT 'WITH HOLD'; COMMIT
-- @@
BEGIN; DECLARE c11 CURSOR WITH HOLD FOR SELECT 1; FETCH c11; COMMIT
-- @@
BEGIN; DECLARE c18 CURSOR WITH HOLD FOR SELECT 1; DECLARE c19 CURSOR FOR SELECT 2; COMMIT
-- @@ # left open: the harness commits
BEGIN; DECLARE c15 CURSOR WITH HOLD FOR SELECT 1
-- @@ # cursors that end with their transaction
BEGIN; DECLARE c7 CURSOR WITHOUT HOLD FOR SELECT 1; COMMIT
-- @@
BEGIN; DECLARE c8 CURSOR FOR SELECT 1; COMMIT
-- @@
BEGIN; DECLARE c9 CURSOR WITH HOLD FOR SELECT 1; ROLLBACK
-- @@
BEGIN; DECLARE c10 CURSOR WITH HOLD FOR SELECT 1; CLOSE c10; COMMIT
-- @@
BEGIN; DECLARE c13 CURSOR FOR SELECT 'WITH HOLD'; COMMIT
-- @@
BEGIN; DECLARE c14 CURSOR FOR WITH hold AS (SELECT 1) SELECT * FROM hold; COMMIT
-- @@
CLOSE ALL
-- @@ error
DECLARE c16 CURSOR FOR SELECT 1
-- @@ # SQL PREPARE
PREPARE p1 AS SELECT 1
-- @@
PREPARE p2 (int) AS SELECT $1 + 1
-- @@
prepare p3(text, int) as select $1, $2
-- @@
PREPARE p4 AS SELECT 1; EXECUTE p4
-- @@
PREPARE "P12" AS SELECT 1
-- @@
/* c */ PREPARE p13 AS SELECT 1
-- @@
PREPARE p11 AS INSERT INTO t (a) VALUES ($1)
-- @@
SELECT 1; PREPARE p8 AS SELECT 2
-- @@
BEGIN; PREPARE p9 AS SELECT 1; COMMIT
-- @@
BEGIN; PREPARE p10 AS SELECT 1; ROLLBACK
-- @@
PREPARE p5 AS SELECT 1; DEALLOCATE p5
-- @@
PREPARE p6 AS SELECT 1; DEALLOCATE ALL
-- @@ may-fail
PREPARE p7 AS SELECT 1; DISCARD ALL
-- @@ error
PREPARE p14 AS SELEC 1
-- @@ error
EXECUTE no_such_plan
-- @@ error
DEALLOCATE p15
-- @@ error
BEGIN; PREPARE TRANSACTION 'oracle_gid'
-- @@
SELECT name FROM pg_prepared_statements
-- @@
EXPLAIN SELECT 1
-- @@ # DISCARD and DEALLOCATE ALL drop every prepared statement, the pooler's too
DISCARD ALL
-- @@
discard all;
-- @@
DISCARD/* c */ALL
-- @@
DEALLOCATE ALL
-- @@
deallocate prepare all
-- @@
SELECT 1; DEALLOCATE ALL
-- @@
BEGIN; DEALLOCATE ALL; COMMIT
-- @@
BEGIN; DEALLOCATE ALL; ROLLBACK
-- @@ error
BEGIN; DISCARD ALL
-- @@ may-fail
SELECT 1; DISCARD ALL
-- @@ # the pooler's own statement by name
DEALLOCATE "PGHARBOR_1"
-- @@
DEALLOCATE PREPARE "PGHARBOR_1"
-- @@ error # unquoted, the name folds to lower case
DEALLOCATE PGHARBOR_1
-- @@ error
DEALLOCATE "all"
-- @@
DISCARD PLANS
-- @@
DISCARD SEQUENCES
-- @@ pin # LOAD: plpgsql is loaded already: nothing the oracle can see
LOAD 'plpgsql'
-- @@
LOAD 'auto_explain'
-- @@
load '$libdir/auto_explain'
-- @@
SELECT 1; LOAD 'auto_explain'
-- @@
SET auto_explain.log_min_duration = 0; LOAD 'auto_explain'
-- @@ error
LOAD 'no_such_library'
