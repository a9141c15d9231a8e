-- The shared schema of SPEC §2, exactly, then Sagacity-Python's one extension table.
CREATE TABLE IF NOT EXISTS side_effect_journal (
    saga_id TEXT NOT NULL, seq BIGINT NOT NULL, tool_name TEXT NOT NULL, phase TEXT NOT NULL,
    input TEXT NOT NULL DEFAULT '', payload TEXT NOT NULL DEFAULT '', timestamp TIMESTAMP NOT NULL,
    hash CHAR(64) NOT NULL, PRIMARY KEY (saga_id, seq));
CREATE INDEX IF NOT EXISTS idx_journal_saga_id ON side_effect_journal (saga_id);
CREATE TABLE IF NOT EXISTS sagacity_approval_request (
    saga_id TEXT NOT NULL, journal_seq BIGINT NOT NULL, tool_name TEXT NOT NULL,
    input TEXT NOT NULL DEFAULT '', input_hash CHAR(64) NOT NULL, created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (saga_id, journal_seq));
-- Extension: when a pending request expires. Beside the shared table, not in it, so another
-- implementation sharing the database sees the shared table unchanged.
CREATE TABLE IF NOT EXISTS sagacity_approval_expiry (
    saga_id TEXT NOT NULL, journal_seq BIGINT NOT NULL, expires_at TIMESTAMP NOT NULL,
    PRIMARY KEY (saga_id, journal_seq));
-- Extension: the W3C trace context (traceparent, tracestate) of the span that opened a gate, so
-- that its approval and resume, perhaps in another process, link to the trace that gated
-- (docs/observability.md). Working state beside the request, never evidence: written and pruned
-- by the OpenTelemetry integration only; the journal and its hash rule do not see it.
CREATE TABLE IF NOT EXISTS sagacity_approval_trace (
    saga_id TEXT NOT NULL, journal_seq BIGINT NOT NULL, traceparent TEXT NOT NULL,
    tracestate TEXT NOT NULL DEFAULT '', PRIMARY KEY (saga_id, journal_seq));
-- Extension: the saga index (src/sagacity/_index.py): each saga's status and counts folded from
-- its journal, for operator reads that must not fold every journal. Derived, never evidence:
-- `sagacity db reindex` drops and rebuilds it.
CREATE TABLE IF NOT EXISTS sagacity_saga_index (
    saga_id TEXT NOT NULL PRIMARY KEY, status TEXT NOT NULL, entry_count BIGINT NOT NULL,
    started_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL, awaiting_approval INTEGER NOT NULL,
    in_doubt INTEGER NOT NULL, compensating BOOLEAN NOT NULL, broken_at BIGINT,
    broken_message TEXT NOT NULL DEFAULT '', attention BOOLEAN NOT NULL);
CREATE INDEX IF NOT EXISTS idx_saga_index_updated ON sagacity_saga_index (updated_at, saga_id);
CREATE INDEX IF NOT EXISTS idx_saga_index_status ON sagacity_saga_index (status, updated_at, saga_id);
CREATE INDEX IF NOT EXISTS idx_saga_index_attention ON sagacity_saga_index (saga_id) WHERE attention;
-- How many sagas have each status: moved by every catch-up by what it changed, so counting is a
-- read of a few rows however many sagas there are. Seeded from the rows if made after them.
CREATE TABLE IF NOT EXISTS sagacity_saga_counts (status TEXT NOT NULL PRIMARY KEY, sagas BIGINT NOT NULL);
INSERT INTO sagacity_saga_counts (status, sagas)
SELECT status, count(*) FROM sagacity_saga_index
WHERE NOT EXISTS (SELECT 1 FROM sagacity_saga_counts) GROUP BY status;
-- Sagas whose journal changed since the index last looked: triggers (whoever wrote: this
-- library, another implementation, a person with psql) note the saga of every row inserted,
-- updated or deleted, and of every saga indexed when the table is truncated. A reader deletes
-- the notes it takes and folds those sagas again in the same transaction. A heap without index
-- or key, written by a row trigger: the cheapest note PostgreSQL can take (~2 % of a one-row
-- commit, measured; a statement trigger with a transition table cost 8 %).
CREATE TABLE IF NOT EXISTS sagacity_index_dirty (saga_id TEXT NOT NULL);
-- Extension: the log (src/sagacity/checkpoints/_log.py): the order the checkpointer gave the
-- entries, each row inserted once and never changed. Evidence for witnesses, not for this table's
-- owner: a re-numbered or re-hashed row has a tree no consistency proof links to the cosigned one.
CREATE TABLE IF NOT EXISTS sagacity_log (
    log_index BIGINT PRIMARY KEY, saga_id TEXT NOT NULL, seq BIGINT NOT NULL, hash CHAR(64) NOT NULL,
    UNIQUE (saga_id, seq));
-- SECURITY DEFINER, so a writer's role (the Java library's, an append-only role) needs no
-- privilege on the notes; every name is schema-qualified (sagacity_schema. is replaced by the
-- schema the tables are created in), so a writer's search_path cannot redirect it.
CREATE OR REPLACE FUNCTION sagacity_schema.sagacity_note_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO sagacity_schema.sagacity_index_dirty (saga_id) VALUES (NEW.saga_id);
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION sagacity_schema.sagacity_note_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO sagacity_schema.sagacity_index_dirty (saga_id)
        SELECT saga_id FROM sagacity_schema.sagacity_saga_index;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO sagacity_schema.sagacity_index_dirty (saga_id) VALUES (OLD.saga_id);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.saga_id IS DISTINCT FROM OLD.saga_id THEN
        INSERT INTO sagacity_schema.sagacity_index_dirty (saga_id) VALUES (NEW.saga_id);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS sagacity_index_insert ON side_effect_journal;
CREATE TRIGGER sagacity_index_insert AFTER INSERT ON side_effect_journal
    FOR EACH ROW EXECUTE FUNCTION sagacity_schema.sagacity_note_insert();
DROP TRIGGER IF EXISTS sagacity_index_change ON side_effect_journal;
CREATE TRIGGER sagacity_index_change AFTER UPDATE OR DELETE ON side_effect_journal
    FOR EACH ROW EXECUTE FUNCTION sagacity_schema.sagacity_note_change();
DROP TRIGGER IF EXISTS sagacity_index_truncate ON side_effect_journal;
CREATE TRIGGER sagacity_index_truncate AFTER TRUNCATE ON side_effect_journal
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_schema.sagacity_note_change();
-- A journal that was there before the index (an upgrade, another implementation's database):
-- every saga not yet indexed is noted once, and the first read folds it.
INSERT INTO sagacity_index_dirty (saga_id)
SELECT DISTINCT j.saga_id FROM side_effect_journal j
WHERE NOT EXISTS (SELECT 1 FROM sagacity_saga_index i WHERE i.saga_id = j.saga_id)
  AND NOT EXISTS (SELECT 1 FROM sagacity_index_dirty d WHERE d.saga_id = j.saga_id);
