-- Comments, quotes and dollar quotes: where a statement really starts,
-- under both values of standard_conforming_strings. Every hidden or
-- visible statement is the same `SET search_path = oracle_s`, so the
-- oracle shows at once whether PostgreSQL ran it.

-- @@ # known bad: a line comment ended by a carriage return
SELECT 1 -- note{{CR}}; SET search_path = oracle_s
-- @@
SELECT 1 -- note{{CR}}{{LF}}; SET search_path = oracle_s
-- @@
SELECT 1 -- note{{LF}}; SET search_path = oracle_s
-- @@
-- leading comment{{CR}}SET search_path = oracle_s
-- @@
SELECT 1 --{{CR}}--{{CR}}; SET search_path = oracle_s
-- @@
SELECT 1 -- only a comment; SET search_path = oracle_s
-- @@
SELECT 1; -- SET search_path = oracle_s
-- @@ # form feed and vertical tab do not end a line comment
SELECT 1 --{{FF}}; SET search_path = oracle_s
-- @@
SELECT 1 --{{VT}}; SET search_path = oracle_s
-- @@
SELECT 1;{{FF}}SET search_path = oracle_s
-- @@ may-fail # PostgreSQL 15 does not count a vertical tab as white space
SELECT 1;{{VT}}SET search_path = oracle_s
-- @@
-- /*{{LF}}SET search_path = oracle_s
-- @@
SELECT 1 --+{{LF}}; SET search_path = oracle_s
-- @@
SELECT 2 *-- c{{LF}}3; SET search_path = oracle_s
-- @@
SELECT 1 +/* c */2; SET search_path = oracle_s
-- @@ # block comments
/* SET search_path = oracle_s */ SELECT 1
-- @@ # known bad family: nested comments
/* /* */ SET search_path = oracle_s */ SELECT 1
-- @@
/* /* */ */ SET search_path = oracle_s
-- @@
/* /* /* */ */ SET search_path = oracle_s */ SELECT 1
-- @@
/* a /* b /* c */ b */ a */ SET search_path = oracle_s
-- @@
/*/ SET search_path = oracle_s */ SELECT 1
-- @@
/**/SET search_path = oracle_s
-- @@
/***/ SET search_path = oracle_s
-- @@
/* -- */ SET search_path = oracle_s
-- @@
/* ' */ SET search_path = oracle_s
-- @@
/* $$ */ SET search_path = oracle_s
-- @@
SELECT 1 /* ; SET search_path = oracle_s; */
-- @@ error # unterminated: PostgreSQL refuses the whole text
SELECT 1 /* unterminated ; SET search_path = oracle_s
-- @@ error
SELECT 1 /* /* */ ; SET search_path = oracle_s
-- @@ error
SELECT 'unterminated ; SET search_path = oracle_s
-- @@ error
SELECT $$unterminated ; SET search_path = oracle_s
-- @@ error
SELECT 1 AS "unterminated ; SET search_path = oracle_s
-- @@ # statements inside strings and identifiers do not run
SELECT 'SET search_path = oracle_s'
-- @@
SELECT 'it''s; SET search_path = oracle_s; --'
-- @@
SELECT 'a;b', ';' AS x
-- @@
SELECT ';' AS x; SET search_path = oracle_s
-- @@
SELECT '--'; SET search_path = oracle_s
-- @@
SELECT '/*'; SET search_path = oracle_s; --*/
-- @@
SELECT '$$'; SET search_path = oracle_s; --$$
-- @@
SELECT 1 AS "a""; SET search_path = oracle_s; --"
-- @@
SELECT 1 AS "--"; SET search_path = oracle_s
-- @@
SELECT 1 AS "/*"; SET search_path = oracle_s
-- @@
SELECT 1 AS "$$"; SET search_path = oracle_s
-- @@
SELECT 1 AS "'"; SET search_path = oracle_s
-- @@
SELECT 1 AS "SET", 2 AS "LISTEN"
-- @@
SELECT 1 AS é; SET search_path = oracle_s
-- @@
SELECT 'é'; SET search_path = oracle_s
-- @@ # string continuation: a newline between two literals joins them
SELECT 'a'{{LF}}'b'; SET search_path = oracle_s
-- @@
SELECT 'a' -- c{{LF}}'b'; SET search_path = oracle_s
-- @@ error
SELECT 'a' 'b'; SET search_path = oracle_s
-- @@ # the continuation of E'' escapes too
SELECT E'a'{{LF}}'\''; SET search_path = oracle_s; --'
-- @@
SELECT E'a' -- c{{LF}}'\''; SET search_path = oracle_s; --'
-- @@
SELECT E'a'{{CR}}'\''; SET search_path = oracle_s; --'
-- @@
SELECT E'a'{{LF}}'\'; SET search_path = oracle_s; --'
-- @@ may-fail
SELECT E'a' /* c */{{LF}}'\''; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT 'a'{{LF}}'\''; SET search_path = oracle_s; --'
-- @@ error # the continuation of U&'' takes Unicode escapes: \' is not one
SELECT U&'a'{{LF}}'\'; SET search_path = oracle_s; --'
-- @@ may-fail
SELECT B'1'{{LF}}'0''; SET search_path = oracle_s; --'
-- @@ # backslashes with standard_conforming_strings on (the default)
SELECT 'x\'; SET search_path = oracle_s; --'
-- @@
SELECT 'x\''; SET search_path = oracle_s; --'
-- @@
SELECT 'a\\'; SET search_path = oracle_s; --'
-- @@
SELECT 'a\\\''; SET search_path = oracle_s; --'
-- @@
SELECT 'é\'; SET search_path = oracle_s; --'
-- @@
SELECT N'x\'; SET search_path = oracle_s; --'
-- @@
SELECT N'x\''; SET search_path = oracle_s; --'
-- @@
SELECT E'x\''; SET search_path = oracle_s; --'
-- @@
SELECT e'x\'; SET search_path = oracle_s; --'
-- @@
SELECT E'\\'; SET search_path = oracle_s
-- @@
SELECT E'\x41\101\u0041'; SET search_path = oracle_s
-- @@ scs=off # known bad: with standard_conforming_strings off, \' does not end the literal
SELECT 'x\''; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT 'x\'; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT 'a\\'; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT 'a\\\''; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT 'é\'; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT 'a''b\\'; SET search_path = oracle_s
-- @@ scs=off
SELECT '\'; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT N'x\''; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT n'x\'; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT E'x\''; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT E'x\'; SET search_path = oracle_s; --'
-- @@ scs=off
SELECT E'\''; SET search_path = oracle_s; --'
-- @@ scs=off # no escapes in dollar quotes, identifiers or comments
SELECT $$\$$; SET search_path = oracle_s
-- @@ scs=off
SELECT 1 AS "a\"; SET search_path = oracle_s
-- @@ scs=off
SELECT 1 /* \*/ ; SET search_path = oracle_s
-- @@ scs=off
SELECT 1 -- \{{LF}}; SET search_path = oracle_s
-- @@ scs=off
SELECT B'1', X'F'; SELECT 'x\''; SET search_path = oracle_s; --'
-- @@ scs=off may-fail
SELECT B'1\'; SET search_path = oracle_s; --'
-- @@ scs=off error # U&'' is refused while standard_conforming_strings is off
SELECT U&'x'; SET search_path = oracle_s
-- @@ # the whole text is read before its first statement runs
SET standard_conforming_strings = off; SELECT 'x\''; SET search_path = oracle_s; --'
-- @@
SET standard_conforming_strings = off; SELECT 'x\'; SET search_path = oracle_s; --'
-- @@ scs=off
SET standard_conforming_strings = on; SELECT 'x\''; SET search_path = oracle_s; --'
-- @@ scs=off
SET standard_conforming_strings = on; SELECT 'x\'; SET search_path = oracle_s; --'
-- @@ # Unicode escapes
SELECT U&'x\0041'; SET search_path = oracle_s
-- @@
SELECT U&'\0041\\'; SET search_path = oracle_s; --'
-- @@
SELECT u&'\+000041'; SET search_path = oracle_s
-- @@
SELECT U&'d!0061t!+000061' UESCAPE '!'; SET search_path = oracle_s
-- @@
SELECT U&'d!0061t''; SET search_path = oracle_s; --' UESCAPE '!'
-- @@ error
SELECT U&'x\'; SET search_path = oracle_s; --'
-- @@
SELECT 1 AS U&"\0041"; SET search_path = oracle_s
-- @@
SELECT 1 AS U&"a""b"; SET search_path = oracle_s
-- @@
SELECT 1 AS U&"a""; SET search_path = oracle_s; --"
-- @@ # bit strings
SELECT B'1010'; SET search_path = oracle_s
-- @@
SELECT b'1010'::int; SET search_path = oracle_s
-- @@
SELECT X'1F'; SET search_path = oracle_s
-- @@
SELECT x'1f'::int; SET search_path = oracle_s
-- @@ may-fail
SELECT B'10''10'; SET search_path = oracle_s; --'
-- @@ may-fail
SELECT B'1\'; SET search_path = oracle_s; --'
-- @@ # dollar quotes
SELECT $$; SET search_path = oracle_s; $$
-- @@
SELECT $$it's$$; SET search_path = oracle_s
-- @@
SELECT $$a$$ || $$b$$; SET search_path = oracle_s
-- @@
SELECT $a$ $$ ; SET search_path = oracle_s; $$ $a$
-- @@
SELECT $a$x$a$; SET search_path = oracle_s
-- @@
SELECT $a$ $A$; SET search_path = oracle_s; $a$
-- @@
SELECT $_$x$_$; SET search_path = oracle_s
-- @@
SELECT $a1$ $a$ ; SET search_path = oracle_s; $a1$
-- @@
SELECT $é$x$é$; SET search_path = oracle_s
-- @@
SELECT $q$'$q$; SET search_path = oracle_s; --'
-- @@
SELECT $q$--$q$; SET search_path = oracle_s
-- @@
SELECT $q$/*$q$; SET search_path = oracle_s; --*/
-- @@ # a dollar sign inside an identifier starts no quote
SELECT 1 AS a$b$; SET search_path = oracle_s
-- @@
SELECT 1 AS a$$; SET search_path = oracle_s; --$$
-- @@ error
SELECT 1 AS "x"$$; SET search_path = oracle_s; $$
-- @@ may-fail
SELECT 1$a$; SET search_path = oracle_s; --$a$
-- @@ may-fail
SELECT 1.5$a$; SET search_path = oracle_s; --$a$
-- @@ error # a positional parameter in a simple query
SELECT $1; SET search_path = oracle_s
-- @@ # words that matter only at the start of a statement
SELECT 1 AS set
-- @@
SELECT 1 AS listen, 2 AS load, 3 AS prepare, 4 AS discard, 5 AS reset
-- @@
SELECT prepare FROM (SELECT 1 AS prepare) x
-- @@
SELECT x.load FROM (SELECT 1 AS load) x
-- @@
SELECT 'LISTEN x', 'CREATE TEMP TABLE x', 'pg_advisory_lock(1)', 'set_config(a, b, false)'
-- @@ # a dollar-quoted string is scanned as if it were code
SELECT $$LISTEN x$$
-- @@
SELECT $$SET search_path = oracle_s$$
-- @@
SELECT $$pg_advisory_lock(1)$$
