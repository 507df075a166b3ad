-- Argument checks every dg_* function starts with (SPEC §10 rule 1): a bad argument raises DG000
-- with a message that names the parameter, before anything is locked or written. Not pinned
-- (no SET): they run under their pinned caller's search_path and name pg_catalog objects only,
-- except _dg_limits, which reads the limits table of migration 0002.

-- _dg_limits(): the schema's limits row (max_value_bytes, max_call_bytes, max_page_bytes); the
-- defaults of migration 0002 if someone deleted the row. PL/pgSQL, so that its query plan is
-- cached per session (a SQL function returning a row is planned again on every call: 15 us).
CREATE OR REPLACE FUNCTION _dg_limits() RETURNS limits
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    l limits;
BEGIN
    SELECT * INTO l FROM limits LIMIT 1;
    IF NOT FOUND THEN
        l := ROW(true, 67108864, 134217728, 16777216)::limits;
    END IF;
    RETURN l;
END;
$$;

-- _dg_id(value, name): DG000 unless value is an identifier: not NULL, 1..512 UTF-8 bytes (text
-- cannot hold NUL; the server encoding is UTF8, so octet_length counts UTF-8 bytes).
CREATE OR REPLACE FUNCTION _dg_id(p_value text, p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_name USING ERRCODE = 'DG000';
    END IF;
    IF pg_catalog.octet_length(p_value) NOT BETWEEN 1 AND 512 THEN
        RAISE EXCEPTION '% must be 1..512 UTF-8 bytes, got %', p_name,
            pg_catalog.octet_length(p_value) USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_opt_id(value, name): NULL, or an identifier as _dg_id.
CREATE OR REPLACE FUNCTION _dg_opt_id(p_value text, p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_value IS NOT NULL AND pg_catalog.octet_length(p_value) NOT BETWEEN 1 AND 512 THEN
        RAISE EXCEPTION '% must be 1..512 UTF-8 bytes, got %', p_name,
            pg_catalog.octet_length(p_value) USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_ids(values, name, max_count): every element an identifier (a NULL array is empty), at
-- most max_count elements. The message names the first bad element: name[i] (1-based).
-- Returns true, so that a hot path calls it in an expression, which is no statement (SPEC §21),
-- where a PERFORM is one.
CREATE OR REPLACE FUNCTION _dg_ids(p_values text[], p_name text, p_max_count integer)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_bad integer := 0;
    v_value text;
BEGIN
    IF coalesce(pg_catalog.cardinality(p_values), 0) = 0 THEN
        RETURN true;
    END IF;
    IF pg_catalog.array_ndims(p_values) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array', p_name USING ERRCODE = 'DG000';
    END IF;
    IF pg_catalog.cardinality(p_values) > p_max_count THEN
        RAISE EXCEPTION '% must have at most % elements', p_name, p_max_count
            USING ERRCODE = 'DG000';
    END IF;
    -- A loop of simple expressions: cheaper than a query for the short arrays of most calls.
    FOREACH v_value IN ARRAY p_values LOOP
        v_bad := v_bad + 1;
        IF v_value IS NULL OR pg_catalog.octet_length(v_value) NOT BETWEEN 1 AND 512 THEN
            PERFORM _dg_id(v_value, p_name || '[' || v_bad || ']');
        END IF;
    END LOOP;
    RETURN true;
END;
$$;

-- _dg_task_paths(values, name, max_count): every element a task path, 0..4096 bytes and not
-- NULL (a NULL array is allowed: no paths), at most max_count elements. The message names the
-- first bad element: name[i] (1-based).
-- Returns true, for expressions (as _dg_ids).
CREATE OR REPLACE FUNCTION _dg_task_paths(p_values text[], p_name text, p_max_count integer)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_i integer := 0;
    v_value text;
BEGIN
    IF coalesce(pg_catalog.cardinality(p_values), 0) = 0 THEN
        RETURN true;
    END IF;
    IF pg_catalog.array_ndims(p_values) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array', p_name USING ERRCODE = 'DG000';
    END IF;
    IF pg_catalog.cardinality(p_values) > p_max_count THEN
        RAISE EXCEPTION '% must have at most % elements', p_name, p_max_count
            USING ERRCODE = 'DG000';
    END IF;
    FOREACH v_value IN ARRAY p_values LOOP
        v_i := v_i + 1;
        IF v_value IS NULL THEN
            RAISE EXCEPTION '%[%] must not be NULL', p_name, v_i USING ERRCODE = 'DG000';
        END IF;
        IF pg_catalog.octet_length(v_value) > 4096 THEN
            RAISE EXCEPTION '%[%] must be at most 4096 bytes', p_name, v_i USING ERRCODE = 'DG000';
        END IF;
    END LOOP;
    RETURN true;
END;
$$;

-- _dg_json_problem(text): NULL when the text is one JSON value (RFC 8259) that every caller can
-- read back, else what is wrong with it. Refused: invalid JSON (NaN, '{"a":', 'nope', lone
-- surrogate escapes "\ud800"), nesting deeper than 512 containers (a scalar has depth 0), and
-- numbers outside the IEEE-754 double range (Python, JavaScript and most JSON libraries read
-- them as infinity). Accepted: "\u0000" escapes, which jsonb cannot hold but json text can (the
-- value is checked as jsonb with them read as spaces: the structure is the same). Size is the
-- caller's check. Duplicate object keys are accepted (RFC 8259 allows them; the last wins, as
-- in jsonb and Python's json).
CREATE OR REPLACE FUNCTION _dg_json_problem(p_text text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v jsonb;
BEGIN
    -- A short scalar — null, true, false, an integer of at most 15 digits, a string without
    -- escapes or control characters — is JSON a parse would accept, at depth 0 and inside the
    -- double range: answered by one regular expression, without the parse's EXCEPTION block
    -- (a subtransaction) and its two path scans (issue 25: e.g. Completed()'s detail 'null').
    IF pg_catalog.octet_length(p_text) <= 256
       AND p_text ~ '^[ \t\n\r]*(null|true|false|-?(0|[1-9][0-9]{0,14})|"[^"\\[:cntrl:]]*")[ \t\n\r]*$'
    THEN
        RETURN NULL;
    END IF;
    BEGIN
        v := p_text::jsonb;
    EXCEPTION
        WHEN untranslatable_character THEN
            BEGIN
                PERFORM p_text::json;
                v := pg_catalog.replace(p_text, '\u0000', '\u0020')::jsonb;
            EXCEPTION
                WHEN invalid_text_representation OR untranslatable_character THEN
                    RETURN 'is not valid JSON (RFC 8259)';
                WHEN statement_too_complex OR program_limit_exceeded THEN
                    RETURN 'nests deeper than 512 containers';
            END;
        WHEN invalid_text_representation THEN
            RETURN 'is not valid JSON (RFC 8259)';
        WHEN statement_too_complex OR program_limit_exceeded THEN
            -- the parser's stack ran out: far deeper than 512
            RETURN 'nests deeper than 512 containers';
        WHEN numeric_value_out_of_range THEN
            RETURN 'holds a number outside the IEEE-754 double range';
    END;
    IF pg_catalog.jsonb_path_exists(
           v, 'strict $.**{512} ? (@.type() == "array" || @.type() == "object")') THEN
        RETURN 'nests deeper than 512 containers';
    END IF;
    IF pg_catalog.jsonb_path_exists(
           v, 'strict $.** ? (@.type() == "number" && '
              '(@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308))') THEN
        RETURN 'holds a number outside the IEEE-754 double range';
    END IF;
    RETURN NULL;
END;
$$;

-- _dg_json(value, name, max_bytes): DG000 unless value is JSON text (_dg_json_problem) of at
-- most max_bytes UTF-8 bytes. NULL is refused (JSON null is the text 'null').
CREATE OR REPLACE FUNCTION _dg_json(p_value text, p_name text, p_max_bytes bigint) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_problem text;
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION '% must not be NULL (JSON null is the text ''null'')', p_name
            USING ERRCODE = 'DG000';
    END IF;
    IF pg_catalog.octet_length(p_value) > p_max_bytes THEN
        RAISE EXCEPTION '% is % bytes, over max_value_bytes %', p_name,
            pg_catalog.octet_length(p_value), p_max_bytes USING ERRCODE = 'DG000';
    END IF;
    v_problem := _dg_json_problem(p_value);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION '% %', p_name, v_problem USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_jsons(values, name, max_bytes, nulls): every element JSON text as _dg_json; NULL elements
-- allowed (they mean JSON null) when nulls. The message names the element: name[i] (1-based).
-- Returns true, for expressions (as _dg_ids).
CREATE OR REPLACE FUNCTION _dg_jsons(p_values text[], p_name text, p_max_bytes bigint,
                                     p_nulls boolean) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF pg_catalog.array_ndims(p_values) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array', p_name USING ERRCODE = 'DG000';
    END IF;
    FOR i IN 1 .. coalesce(pg_catalog.cardinality(p_values), 0) LOOP
        IF (p_values[i] IS NOT NULL OR NOT p_nulls)
           AND (pg_catalog.octet_length(p_values[i]) <= p_max_bytes
                AND _dg_json_problem(p_values[i]) IS NULL) IS NOT TRUE THEN
            PERFORM _dg_json(p_values[i], p_name || '[' || i || ']', p_max_bytes);
        END IF;
    END LOOP;
    RETURN true;
END;
$$;

-- _dg_ts(value, name): NULL, or a finite timestamp every caller can represent (years 1..9999,
-- the range of Python's datetime; JavaScript's Date covers it too).
CREATE OR REPLACE FUNCTION _dg_ts(p_value timestamptz, p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_value IS NOT NULL AND NOT (p_value >= '0001-01-01 00:00:00+00'::timestamptz
                                    AND p_value < '10000-01-01 00:00:00+00'::timestamptz) THEN
        RAISE EXCEPTION '% must be a timestamp in years 1..9999 (UTC), got %', p_name, p_value
            USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_tss(values, name): every element NULL or as _dg_ts. Returns true, for expressions (as
-- _dg_ids).
CREATE OR REPLACE FUNCTION _dg_tss(p_values timestamptz[], p_name text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_bad integer := 0;
    v_value timestamptz;
BEGIN
    IF coalesce(pg_catalog.cardinality(p_values), 0) = 0 THEN
        RETURN true;
    END IF;
    IF pg_catalog.array_ndims(p_values) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array', p_name USING ERRCODE = 'DG000';
    END IF;
    FOREACH v_value IN ARRAY p_values LOOP
        v_bad := v_bad + 1;
        IF v_value IS NOT NULL AND NOT (v_value >= '0001-01-01 00:00:00+00'::timestamptz
                                        AND v_value < '10000-01-01 00:00:00+00'::timestamptz)
        THEN
            PERFORM _dg_ts(v_value, p_name || '[' || v_bad || ']');
        END IF;
    END LOOP;
    RETURN true;
END;
$$;

-- _dg_count(value, name, max): DG000 unless 1 <= value <= max (limits, batch sizes).
CREATE OR REPLACE FUNCTION _dg_count(p_value bigint, p_name text, p_max bigint) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_value IS NULL OR p_value NOT BETWEEN 1 AND p_max THEN
        RAISE EXCEPTION '% must be 1..%, got %', p_name, p_max, coalesce(p_value::text, 'NULL')
            USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_not_null(ok, name): DG000 '<name> must not be NULL' unless ok (ok = value IS NOT NULL).
CREATE OR REPLACE FUNCTION _dg_not_null(p_ok boolean, p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF NOT p_ok THEN
        RAISE EXCEPTION '% must not be NULL', p_name USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_call_bytes(size, max): DG000 when one call's arguments (size: the sum of their
-- pg_column_size) exceed max_call_bytes.
CREATE OR REPLACE FUNCTION _dg_call_bytes(p_size bigint, p_max bigint) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_size > p_max THEN
        RAISE EXCEPTION 'the call writes % bytes, over max_call_bytes %', p_size, p_max
            USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_same_json(a, b): the two JSON texts are the same JSON value (SPEC §10 rule 3): objects as
-- unordered maps (a duplicate key: the last wins), arrays in order, strings by code point,
-- numbers by mathematical value (jsonb keeps them as numeric: 1 = 1.0 = 1e0, no rounding).
-- Text holding a "\u0000" escape, which jsonb cannot hold, is the same only as byte-equal text.
CREATE OR REPLACE FUNCTION _dg_same_json(p_a text, p_b text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_a = p_b THEN
        RETURN true;
    END IF;
    RETURN p_a::jsonb = p_b::jsonb;
EXCEPTION
    -- untranslatable_character: a "\u0000" escape; the others: a kept input written before
    -- these checks (version 1) that is not JSON. Neither is the same as a checked input.
    WHEN untranslatable_character OR invalid_text_representation OR statement_too_complex
         OR program_limit_exceeded OR numeric_value_out_of_range THEN
        RETURN false;
END;
$$;

-- dg_admin_set_limit_v1(name, value): set one limit of the schema ('max_value_bytes',
-- 'max_call_bytes' or 'max_page_bytes'; value >= 1) and return the limits row. For the schema's
-- owner (a DBA): it runs with the caller's rights (not SECURITY DEFINER), so a runtime role
-- without UPDATE on the limits table gets permission denied. Raises DG000.
CREATE OR REPLACE FUNCTION dg_admin_set_limit_v1(p_name text, p_value bigint)
RETURNS TABLE (max_value_bytes bigint, max_call_bytes bigint, max_page_bytes bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_check(p_name IN ('max_value_bytes', 'max_call_bytes', 'max_page_bytes'),
                      'name must be max_value_bytes, max_call_bytes or max_page_bytes');
    PERFORM _dg_count(p_value, 'value', 9223372036854775807);
    UPDATE limits l
       SET max_value_bytes = CASE WHEN p_name = 'max_value_bytes' THEN p_value
                                  ELSE l.max_value_bytes END,
           max_call_bytes = CASE WHEN p_name = 'max_call_bytes' THEN p_value
                                 ELSE l.max_call_bytes END,
           max_page_bytes = CASE WHEN p_name = 'max_page_bytes' THEN p_value
                                 ELSE l.max_page_bytes END;
    RETURN QUERY SELECT l.max_value_bytes, l.max_call_bytes, l.max_page_bytes FROM limits l;
END;
$$;
