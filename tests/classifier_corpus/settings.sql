-- SET, RESET and their special forms; the format is described at the top
-- of tests/classifier_oracle.rs. Each entry runs on a fresh session.

-- @@ # SET of a parameter pgharbor does not follow: must pin
SET search_path = oracle_s
-- @@
SET search_path TO oracle_s, public
-- @@
set Search_Path = 'oracle_s'
-- @@
sEt sEaRcH_pAtH = oracle_s
-- @@
SET SESSION search_path = oracle_s
-- @@
SET search_path = oracle_s, "$user", public, pg_temp
-- @@
SET search_path = pg_temp, oracle_s
-- @@ # DEFAULT is RESET: nothing changes
SET search_path TO DEFAULT
-- @@
SET search_path = DEFAULT
-- @@
SET SESSION search_path TO DEFAULT
-- @@
SET search_path = default;
-- @@ # a quoted "default" is a schema name
SET search_path TO "default"
-- @@
SET search_path TO "DEFAULT", public
-- @@ # SET LOCAL outside a transaction block: a warning, nothing lasts
SET LOCAL search_path = oracle_s
-- @@
BEGIN; SET LOCAL search_path = oracle_s; COMMIT
-- @@
BEGIN; SET search_path = oracle_s; COMMIT
-- @@
BEGIN; SET search_path = oracle_s; ROLLBACK
-- @@
BEGIN; SET search_path = oracle_s; SAVEPOINT a; RELEASE a; COMMIT
-- @@
BEGIN; SAVEPOINT a; SET search_path = oracle_s; ROLLBACK TO a; COMMIT
-- @@
BEGIN; SAVEPOINT a; SET search_path = oracle_s; RELEASE a; COMMIT
-- @@
START TRANSACTION; SET SESSION search_path = oracle_s; END
-- @@ # left open: the harness commits
BEGIN; SET search_path = oracle_s
-- @@
BEGIN; SET LOCAL search_path = oracle_s
-- @@
SET search_path = oracle_s; RESET search_path
-- @@
SET search_path = oracle_s; RESET ALL
-- @@
SET search_path = oracle_s; SET search_path TO DEFAULT
-- @@
SELECT 1; SET search_path = oracle_s
-- @@
SET search_path = oracle_s; SELECT 1
-- @@
SELECT 1;SET search_path=oracle_s;SELECT 2
-- @@
SET search_path = oracle_s;;;
-- @@
;SET search_path = oracle_s
-- @@
set/**/search_path=oracle_s
-- @@
SET/* c */SESSION/* c */search_path/* c */TO/* c */oracle_s
-- @@
SET
search_path
=
oracle_s
-- @@
SET{{TAB}}search_path{{TAB}}={{TAB}}oracle_s
-- @@
SET{{FF}}search_path{{CR}}={{CR}}{{LF}}oracle_s
-- @@ may-fail # SET ... FROM CURRENT outside a function definition
SET search_path FROM CURRENT
-- @@ may-fail
SET TimeZone FROM CURRENT
-- @@ # RESET in a fresh session changes nothing
RESET search_path
-- @@
RESET ALL
-- @@
reset all;
-- @@
RESET SESSION AUTHORIZATION
-- @@
RESET ROLE
-- @@
RESET work_mem
-- @@
RESET TIME ZONE
-- @@ may-fail
RESET NAMES
-- @@
SET work_mem = '64MB'
-- @@
SET work_mem TO 65536
-- @@ # the default value, but now from the session
SET work_mem = '4MB'
-- @@
SET work_mem = DEFAULT; SET work_mem = '8MB'
-- @@
SET statement_timeout = '10min'
-- @@ # lock_timeout comes from the startup packet
SET lock_timeout = '30s'
-- @@
SET lock_timeout TO DEFAULT
-- @@
RESET lock_timeout
-- @@
SET client_min_messages = warning
-- @@
SET extra_float_digits = 2
-- @@
SET enable_seqscan = off
-- @@
SET enable_seqscan TO false
-- @@
SET random_page_cost = 1.5
-- @@
SET default_transaction_isolation = 'serializable'
-- @@
SET default_transaction_read_only = on
-- @@
SET bytea_output = 'escape'
-- @@
SET check_function_bodies = off
-- @@
SET default_text_search_config = 'pg_catalog.english'
-- @@
SET session_replication_role = replica
-- @@
SET row_security = off
-- @@
SET jit = off
-- @@
SET temp_buffers = '16MB'
-- @@
SET log_statement = 'none'
-- @@
SET plpgsql.variable_conflict = use_column
-- @@
SET auto_explain.log_min_duration = 0
-- @@ may-fail
SET transaction_isolation = 'repeatable read'
-- @@ # transaction-scoped: a warning outside a block
SET TRANSACTION ISOLATION LEVEL SERIALIZABLE
-- @@
BEGIN; SET TRANSACTION READ ONLY; COMMIT
-- @@
BEGIN; SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY; SELECT 1; COMMIT
-- @@
SET CONSTRAINTS ALL DEFERRED
-- @@
BEGIN; SET CONSTRAINTS ALL IMMEDIATE; COMMIT
-- @@
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ
-- @@
SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY
-- @@
set session characteristics as transaction deferrable
-- @@
SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE
-- @@ # TimeZone is followed: no pin needed
SET TIME ZONE 'Asia/Tokyo'
-- @@
SET TIME ZONE LOCAL
-- @@
SET TIME ZONE DEFAULT
-- @@
SET TIME ZONE INTERVAL '+02:00' HOUR TO MINUTE
-- @@
SET TIME ZONE -5
-- @@
SET SESSION TIME ZONE 'Europe/Paris'
-- @@
SET LOCAL TIME ZONE 'Europe/Paris'
-- @@
SET timezone = 'America/New_York'
-- @@ # the value it already has: only the source changes
SET TimeZone TO 'UTC'
-- @@
SET "TimeZone" = 'Europe/Berlin'
-- @@
SET "timezone" = 'Europe/Berlin'
-- @@
SET TIMEZONE TO 'Europe/Berlin'
-- @@
SET time  zone 'Europe/Berlin'
-- @@
SET TIME/* c */ZONE 'Europe/Berlin'
-- @@ may-fail # a qualified name is a custom parameter, not TimeZone
SET pg_catalog.timezone = 'UTC'
-- @@
BEGIN; SET LOCAL TimeZone = 'Asia/Tokyo'
-- @@
BEGIN; SET TimeZone = 'Asia/Tokyo'; ROLLBACK
-- @@
SET DateStyle = 'ISO, DMY'
-- @@
SET datestyle TO German
-- @@
SET datestyle = ISO, YMD
-- @@
SET IntervalStyle = 'iso_8601'
-- @@
SET intervalstyle TO sql_standard
-- @@
SET application_name = 'oracle app'
-- @@
SET application_name TO DEFAULT
-- @@
SET "application_name" = 'x'
-- @@
SET application_name = 'SET search_path = oracle_s'
-- @@
SET client_encoding = 'LATIN1'
-- @@
SET client_encoding TO 'UTF8'
-- @@
SET NAMES 'LATIN1'
-- @@
SET NAMES DEFAULT
-- @@
set names 'SQL_ASCII'
-- @@ # several followed parameters at once
SET TimeZone = 'Asia/Tokyo'; SET application_name = 'two'; SET DateStyle = 'SQL, DMY'
-- @@ # followed and not followed in one text
SET TimeZone = 'UTC'; SET search_path = oracle_s
-- @@
SET application_name = 'a'; SET work_mem = '8MB'; SET application_name = 'b'
-- @@ # standard_conforming_strings is followed, and changes how later SQL reads
SET standard_conforming_strings = off
-- @@
SET standard_conforming_strings TO on
-- @@
SET SESSION standard_conforming_strings = 'off'
-- @@
BEGIN; SET LOCAL standard_conforming_strings = off
-- @@
BEGIN; SET LOCAL standard_conforming_strings = off; COMMIT
-- @@ scs=off
SET standard_conforming_strings = on
-- @@ scs=off
RESET standard_conforming_strings
-- @@ scs=off
RESET ALL
-- @@ scs=off
SET standard_conforming_strings TO DEFAULT
-- @@ scs=off
SET SESSION "standard_conforming_strings" = on
-- @@ scs=off
DISCARD ALL
-- @@ # SET SCHEMA is search_path
SET SCHEMA 'oracle_s'
-- @@
SET SESSION SCHEMA 'oracle_s'
-- @@
SET LOCAL SCHEMA 'oracle_s'
-- @@
SET XML OPTION DOCUMENT
-- @@
SET xmloption = content
-- @@
SET xmloption = document
-- @@ # a parameter named with Unicode escapes
SET U&"search\005fpath" = 'oracle_s'
-- @@
SET U&"work!005fmem" UESCAPE '!' = '8MB'
-- @@
SET U&"TimeZon\0065" = 'Asia/Tokyo'
-- @@
SET U&"search\005fpath" = 'oracle_s'; RESET search_path
-- @@ # custom parameters
SET myext.foo = 'bar'
-- @@
SET myext.foo TO DEFAULT
-- @@
SET "myext"."foo" = 1
-- @@
SET MyExt.Foo = 'x'
-- @@
SET "MyExt.Foo" = 'x'
-- @@
SET myext . foo = 'x'
-- @@
SET LOCAL myext.foo = 'x'
-- @@
BEGIN; SET LOCAL myext.bar = 'y'; COMMIT
-- @@
SET SESSION myext.bar = 'y'
-- @@ may-fail # a custom parameter whose first part is a keyword of SET
SET local.foo = 1
-- @@ may-fail
SET transaction.foo = 1
-- @@ may-fail
SET constraints.foo = 1
-- @@ may-fail
SET names.foo = 1
-- @@ may-fail
SET session.foo = 1
-- @@ may-fail
SET role.foo = 1
-- @@ may-fail
SET schema.foo = 1
-- @@ may-fail
SET time.zone = 1
-- @@ may-fail
SET xml.option = 1
-- @@ may-fail
SET characteristics.foo = 1
-- @@ may-fail
SET SESSION local.foo = 1
-- @@ may-fail
SET LOCAL local.foo = 1
-- @@ may-fail
SET local.foo TO DEFAULT
-- @@ # roles
SET ROLE oracle_role
-- @@
SET ROLE 'oracle_role'
-- @@
SET ROLE "oracle_role"
-- @@
SET SESSION ROLE oracle_role
-- @@
SET role = oracle_role
-- @@
SET "role" = 'oracle_role'
-- @@
SET LOCAL ROLE oracle_role
-- @@
BEGIN; SET LOCAL ROLE oracle_role; COMMIT
-- @@
SET ROLE NONE
-- @@
SET ROLE oracle_role; RESET ROLE
-- @@
SET ROLE oracle_role; SET ROLE NONE
-- @@
SET SESSION AUTHORIZATION oracle_user
-- @@
SET SESSION AUTHORIZATION 'oracle_user'
-- @@
SET SESSION AUTHORIZATION DEFAULT
-- @@ may-fail
SET session_authorization = 'oracle_user'
-- @@
SET SESSION AUTHORIZATION oracle_user; RESET SESSION AUTHORIZATION
-- @@
SET LOCAL SESSION AUTHORIZATION oracle_user
-- @@
BEGIN; SET LOCAL SESSION AUTHORIZATION oracle_user; COMMIT
-- @@ # undoing followed settings must be followed too
-- @before SET TimeZone = 'Asia/Tokyo'
RESET TimeZone
-- @@
-- @before SET application_name = 'before'
-- @before SET DateStyle = 'SQL, DMY'
RESET ALL
-- @@
-- @before SET work_mem = '8MB'
RESET work_mem
-- @@
-- @before SET work_mem = '8MB'
SET work_mem TO DEFAULT
-- @@
-- @before SET work_mem = '8MB'
SET SESSION work_mem = DEFAULT
-- @@
-- @before SET work_mem = '8MB'
-- @before SET search_path = oracle_s
RESET ALL
-- @@
-- @before SET work_mem = '8MB'
DISCARD ALL
-- @@
-- @before SET work_mem = '8MB'
SET work_mem = '16MB'; RESET work_mem; SET work_mem = '32MB'
-- @@
-- @before SET work_mem = '8MB'
BEGIN; RESET work_mem; COMMIT
-- @@
-- @before SET myext.foo = 'x'
RESET myext.foo
-- @@ scs=off
-- @before SET TimeZone = 'Asia/Tokyo'
RESET ALL
-- @@ error # failures leave nothing behind
SET search_path = oracle_s; SELECT 1/0
-- @@ error
BEGIN; SET search_path = oracle_s; SELECT 1/0
-- @@ error
SET no_such_parameter = 1
-- @@ error
SET work_mem = 'lots'
-- @@ error
SET TIME ZONE 'Mars/Olympus'
-- @@ error
SET SESSION AUTHORIZATION no_such_role
-- @@ error
SET ROLE no_such_role
-- @@ error
SET;
-- @@ error
SET search_path
-- @@ error
SET SESSION
-- @@ error
SET local = 1
