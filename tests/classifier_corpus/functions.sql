-- set_config, DO blocks, functions created and called in the same text,
-- and state made by database objects (setup.sql) that the text cannot show.

-- @@ # set_config: the third argument decides
SELECT set_config('search_path', 'oracle_s', false)
-- @@
SELECT set_config('search_path', 'oracle_s', true)
-- @@
SELECT pg_catalog.set_config('work_mem', '8MB', false)
-- @@
SELECT set_config('TimeZone', 'Asia/Tokyo', false)
-- @@
SELECT set_config('myext.foo', 'v', false)
-- @@
SELECT set_config('myext.foo', 'v', true)
-- @@
SELECT "set_config"('work_mem', '8MB', false)
-- @@
SELECT SET_CONFIG('work_mem', '8MB', false)
-- @@
SELECT set_config /* c */ ('work_mem', '8MB', false)
-- @@
SELECT * FROM set_config('work_mem', '8MB', false)
-- @@
SELECT set_config(name, '8MB', false) FROM pg_settings WHERE name = 'work_mem'
-- @@
SELECT set_config('work_mem', '8MB', 1 = 2)
-- @@
SELECT U&"set\005fconfig"('work_mem', '8MB', false)
-- @@
SELECT U&"\0073et_config"('work_mem', '8MB', false)
-- @@ # pg_settings has an UPDATE rule that calls set_config(..., false)
UPDATE pg_settings SET setting = '8MB' WHERE name = 'work_mem'
-- @@
UPDATE pg_catalog.pg_settings SET setting = 'oracle_s' WHERE name = 'search_path'
-- @@
update pg_settings set setting = 'Asia/Tokyo' where name = 'TimeZone'
-- @@
BEGIN; UPDATE pg_settings SET setting = '8MB' WHERE name = 'work_mem'; COMMIT
-- @@
SELECT current_setting('search_path')
-- @@
SELECT current_setting('myext.nothing', true)
-- @@
SHOW search_path
-- @@
SHOW ALL
-- @@
SELECT * FROM pg_settings WHERE name = 'work_mem'
-- @@ # DO blocks
DO $$BEGIN SET search_path = oracle_s; END$$
-- @@
DO $$BEGIN SET LOCAL search_path = oracle_s; END$$
-- @@
DO $$BEGIN SET SESSION work_mem = '8MB'; END$$
-- @@
DO $do$BEGIN SET search_path = oracle_s; END$do$
-- @@
DO LANGUAGE plpgsql $$BEGIN SET search_path = oracle_s; END$$
-- @@
DO $$BEGIN SET search_path = oracle_s; END$$ LANGUAGE plpgsql
-- @@
DO $$BEGIN PERFORM set_config('work_mem', '8MB', false); END$$
-- @@
DO $$BEGIN EXECUTE 'SET work_mem = ''8MB'''; END$$
-- @@
DO $$BEGIN EXECUTE '  SET work_mem = ''8MB'''; END$$
-- @@
DO $$BEGIN EXECUTE E'SET work_mem = ''8MB'''; END$$
-- @@
DO $$BEGIN EXECUTE 'SET ' || 'work_mem = ''8MB'''; END$$
-- @@
DO $$BEGIN EXECUTE format('SET %I = %L', 'work_mem', '8MB'); END$$
-- @@
DO $$BEGIN EXECUTE 'SELECT set_config($1, $2, false)' USING 'work_mem', '8MB'; END$$
-- @@
DO $o$BEGIN EXECUTE $i$SET work_mem = '8MB'$i$; END$o$
-- @@
DO $$BEGIN EXECUTE '/* c */ SET work_mem = ''8MB'''; END$$
-- @@
DO $$BEGIN /* c */ SET work_mem = '8MB'; END$$
-- @@
DO $$BEGIN -- c{{LF}}SET work_mem = '8MB'; END$$
-- @@
DO $$BEGIN NULL; -- c{{LF}}SET work_mem = '8MB'; END$$
-- @@
DO $$BEGIN IF true THEN SET work_mem = '8MB'; END IF; END$$
-- @@
DO $$BEGIN IF false THEN NULL; ELSIF true THEN SET work_mem = '8MB'; END IF; END$$
-- @@
DO $$BEGIN IF false THEN NULL; ELSE SET work_mem = '8MB'; END IF; END$$
-- @@
DO $$BEGIN CASE WHEN true THEN SET work_mem = '8MB'; END CASE; END$$
-- @@
DO $$BEGIN LOOP SET work_mem = '8MB'; EXIT; END LOOP; END$$
-- @@
DO $$BEGIN FOR i IN 1..1 LOOP EXECUTE 'SET work_mem = ''8MB'''; END LOOP; END$$
-- @@
DO $$BEGIN WHILE false LOOP END LOOP; SET work_mem = '8MB'; END$$
-- @@
DO $$DECLARE x int; BEGIN x := 1; SET work_mem = '8MB'; END$$
-- @@
DO $$<<blk>> BEGIN SET work_mem = '8MB'; END blk$$
-- @@
DO $$BEGIN BEGIN SET work_mem = '8MB'; EXCEPTION WHEN others THEN NULL; END; END$$
-- @@ # the SET never runs
DO $$BEGIN PERFORM 1; EXCEPTION WHEN others THEN SET work_mem = '8MB'; END$$
-- @@
DO $$BEGIN RAISE NOTICE 'SET work_mem'; END$$
-- @@
DO $$BEGIN UPDATE t SET a = a WHERE false; END$$
-- @@
DO $$BEGIN PERFORM 1; END$$
-- @@
DO $$BEGIN EXECUTE 'LISTEN oracle_do1'; END$$
-- @@
DO $$BEGIN LISTEN oracle_do2; END$$
-- @@
DO $$BEGIN PERFORM pg_advisory_lock(2001); END$$
-- @@
DO $$BEGIN PERFORM pg_advisory_xact_lock(2004); END$$
-- @@
DO $$BEGIN CREATE TEMP TABLE dt1 (a int); END$$
-- @@
DO $$BEGIN EXECUTE 'CREATE TEMP TABLE dt2 (a int)'; END$$
-- @@
DO $$BEGIN EXECUTE 'CREATE TABLE pg_temp.dt4 (a int)'; END$$
-- @@ may-fail
DO $$BEGIN EXECUTE 'PREPARE dp1 AS SELECT 1'; END$$
-- @@ may-fail
DO $$BEGIN EXECUTE 'DECLARE dc1 CURSOR WITH HOLD FOR SELECT 1'; END$$
-- @@ may-fail
DO $$BEGIN EXECUTE 'LOAD ''auto_explain'''; END$$
-- @@ may-fail
DO $$BEGIN SET ROLE oracle_role; END$$
-- @@ may-fail
DO $$BEGIN EXECUTE 'SET SESSION AUTHORIZATION oracle_user'; END$$
-- @@ may-fail
DO $$BEGIN EXECUTE 'DEALLOCATE ALL'; END$$
-- @@ may-fail
DO $$BEGIN EXECUTE 'DEALLOCATE "PGHARBOR_1"'; END$$
-- @@ # the body in an ordinary string literal
DO 'BEGIN SET search_path = oracle_s; END'
-- @@
DO 'BEGIN PERFORM pg_advisory_lock(2002); END'
-- @@
DO 'BEGIN LISTEN oracle_do3; END'
-- @@
DO 'BEGIN CREATE TEMP TABLE dt3 (a int); END'
-- @@
DO E'BEGIN SET search_path = oracle_s; END'
-- @@
DO LANGUAGE plpgsql 'BEGIN PERFORM set_config(''work_mem'', ''8MB'', false); END'
-- @@
DO U&'BEGIN SET search_path = oracle_s; END'
-- @@ scs=off
DO 'BEGIN SET search_path = oracle_s; END'
-- @@ gap # dynamic SQL assembled at run time
DO $$BEGIN EXECUTE 'SE' || 'T work_mem = ''8MB'''; END$$
-- @@ gap
DO $$BEGIN EXECUTE 'CREATE TABLE pg_te' || 'mp.dt5 (a int)'; END$$
-- @@ gap
DO $$BEGIN EXECUTE 'SELECT pg_advisory_' || 'lock(2005)'; END$$
-- @@ gap
DO $$BEGIN EXECUTE chr(76) || 'ISTEN oracle_do4'; END$$
-- @@ # functions created and called in the same text
CREATE FUNCTION oracle_f1() RETURNS text LANGUAGE sql AS 'SELECT set_config(''work_mem'', ''8MB'', false)'; SELECT oracle_f1()
-- @@
CREATE FUNCTION oracle_f2() RETURNS text LANGUAGE sql AS $$SELECT set_config('work_mem', '8MB', false)$$; SELECT oracle_f2()
-- @@
CREATE FUNCTION oracle_f3() RETURNS void LANGUAGE plpgsql AS 'BEGIN SET work_mem = ''8MB''; END'; SELECT oracle_f3()
-- @@ may-fail
CREATE FUNCTION oracle_f4() RETURNS void LANGUAGE sql AS 'SET work_mem = ''8MB'''; SELECT oracle_f4()
-- @@
CREATE FUNCTION oracle_f5() RETURNS text LANGUAGE sql BEGIN ATOMIC SELECT set_config('work_mem', '8MB', false); END; SELECT oracle_f5()
-- @@
CREATE PROCEDURE oracle_p1() LANGUAGE sql AS 'SELECT pg_advisory_lock(2003)'; CALL oracle_p1()
-- @@
CREATE PROCEDURE oracle_p2() LANGUAGE plpgsql AS $$BEGIN LISTEN oracle_p2; END$$; CALL oracle_p2()
-- @@
CREATE FUNCTION oracle_f6() RETURNS int LANGUAGE sql AS 'SELECT 1'; SELECT oracle_f6()
-- @@
CREATE OR REPLACE FUNCTION oracle_f7() RETURNS text LANGUAGE sql SET search_path = oracle_s AS $$SELECT current_setting('search_path')$$; SELECT oracle_f7()
-- @@
CREATE VIEW oracle_v1 AS SELECT set_config('work_mem', '8MB', false) AS x; SELECT * FROM oracle_v1
-- @@
CREATE FUNCTION oracle_f8() RETURNS int LANGUAGE sql AS 'SELECT 1'
-- @@ gap # state made inside database objects: no text shows it
SELECT oracle_set_path()
-- @@ gap
SELECT oracle_lock(3001)
-- @@ gap
SELECT oracle_listen()
-- @@ gap
SELECT oracle_make_temp()
-- @@ gap
CALL oracle_proc()
-- @@ gap
SELECT * FROM oracle_cfg_view
-- @@ gap
INSERT INTO oracle_trig VALUES (3002)
-- @@ gap
INSERT INTO oracle_ruled VALUES (1)
-- @@ gap
SELECT oracle_set_in_scoped()
-- @@ # database objects whose effects end with the transaction
SELECT oracle_scoped()
-- @@
SELECT oracle_set_local()
-- @@
SELECT oracle_xact_lock(3003)
-- @@ # sequences: currval lasts for the session (reported, not judged)
SELECT nextval('s')
-- @@
SELECT setval('s', 10)
-- @@
SELECT nextval('s'); DISCARD SEQUENCES
-- @@
SELECT last_value FROM s
