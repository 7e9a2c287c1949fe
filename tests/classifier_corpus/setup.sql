-- Objects the classifier oracle's corpus uses (tests/classifier_oracle.rs),
-- created once per run as postgres in harbor_test, as one simple Query.

CREATE SCHEMA oracle_s;
CREATE TABLE oracle_s.t2 (a int);
CREATE TABLE t (
    id serial PRIMARY KEY, a int, b text,
    "set" text, local int, session int, temp int, listen text, reset text
);
INSERT INTO t (a, b) VALUES (1, 'one'), (2, 'two');
-- A table named like the keyword.
CREATE TABLE "temp" (a int);
CREATE SEQUENCE s;

-- SET ROLE and SET SESSION AUTHORIZATION targets; they may read every
-- setting, so that the "after" snapshot sees what the "before" one saw.
CREATE ROLE oracle_role NOLOGIN;
CREATE ROLE oracle_user LOGIN;
GRANT pg_read_all_settings TO oracle_role, oracle_user;
GRANT oracle_role TO postgres;
GRANT ALL ON SCHEMA public, oracle_s TO oracle_role, oracle_user;
GRANT ALL ON ALL TABLES IN SCHEMA public TO oracle_role, oracle_user;
GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO oracle_role, oracle_user;

-- The snapshot's view of sequence state: currval of every sequence this
-- session has used.
CREATE FUNCTION oracle_seq_state(OUT seq text, OUT val text) RETURNS SETOF record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT c.oid::regclass AS rel FROM pg_class c WHERE c.relkind = 'S' LOOP
        BEGIN
            seq := r.rel::text;
            val := currval(r.rel)::text;
            RETURN NEXT;
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END LOOP;
END
$$;

-- Session state made inside database objects, where no reader of the
-- query text can see it (the corpus marks their calls `gap`).
CREATE FUNCTION oracle_set_path() RETURNS void LANGUAGE plpgsql AS
$$BEGIN SET search_path = oracle_s, public; END$$;
CREATE FUNCTION oracle_lock(k bigint) RETURNS void LANGUAGE sql AS
$$SELECT pg_advisory_lock(k)$$;
CREATE FUNCTION oracle_listen() RETURNS void LANGUAGE plpgsql AS
$$BEGIN LISTEN oracle_fn_chan; END$$;
CREATE FUNCTION oracle_make_temp() RETURNS void LANGUAGE plpgsql AS
$$BEGIN CREATE TEMP TABLE oracle_fn_tmp (a int); END$$;
CREATE PROCEDURE oracle_proc() LANGUAGE plpgsql AS
$$BEGIN PERFORM set_config('work_mem', '9MB', false); END$$;
CREATE VIEW oracle_cfg_view AS SELECT set_config('search_path', 'oracle_s, public', false) AS v;
CREATE TABLE oracle_trig (a int);
CREATE FUNCTION oracle_trig_fn() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN PERFORM pg_advisory_lock(NEW.a); RETURN NEW; END$$;
CREATE TRIGGER oracle_trig_lock BEFORE INSERT ON oracle_trig
    FOR EACH ROW EXECUTE FUNCTION oracle_trig_fn();
CREATE TABLE oracle_ruled (a int);
CREATE RULE oracle_rule AS ON INSERT TO oracle_ruled
    DO ALSO SELECT set_config('work_mem', '7MB', false);
-- A plain SET inside a function escapes even the function's own SET clause.
CREATE FUNCTION oracle_set_in_scoped() RETURNS void LANGUAGE plpgsql
    SET work_mem = '1MB' AS $$BEGIN SET work_mem = '2MB'; END$$;

-- Functions whose settings and locks end with the transaction.
CREATE FUNCTION oracle_scoped() RETURNS text LANGUAGE sql
    SET search_path = oracle_s AS $$SELECT current_setting('search_path')$$;
CREATE FUNCTION oracle_set_local() RETURNS void LANGUAGE plpgsql AS
$$BEGIN SET LOCAL work_mem = '8MB'; END$$;
CREATE FUNCTION oracle_xact_lock(k bigint) RETURNS void LANGUAGE sql AS
$$SELECT pg_advisory_xact_lock(k)$$;
