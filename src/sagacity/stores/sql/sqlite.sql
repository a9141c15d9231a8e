-- SPEC §2 with SQLite's nearest types; timestamps are UTC TEXT 'YYYY-MM-DD HH:MM:SS.ffffff'.
CREATE TABLE IF NOT EXISTS side_effect_journal (
    saga_id TEXT NOT NULL, seq INTEGER NOT NULL, tool_name TEXT NOT NULL, phase TEXT NOT NULL,
    input TEXT NOT NULL DEFAULT '', payload TEXT NOT NULL DEFAULT '', timestamp TEXT NOT NULL,
    hash TEXT NOT NULL, PRIMARY KEY (saga_id, seq));
-- No secondary index on saga_id (PostgreSQL's DDL has one, as SPEC §2 fixes it): the primary
-- key's own index on (saga_id, seq) serves every lookup by saga, and a second one only made each
-- append write one more b-tree (~8 % of a durable commit). Databases made before lose it here.
DROP INDEX IF EXISTS idx_journal_saga_id;
CREATE TABLE IF NOT EXISTS sagacity_approval_request (
    saga_id TEXT NOT NULL, journal_seq INTEGER NOT NULL, tool_name TEXT NOT NULL,
    input TEXT NOT NULL DEFAULT '', input_hash TEXT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (saga_id, journal_seq));
CREATE TABLE IF NOT EXISTS sagacity_approval_expiry (
    saga_id TEXT NOT NULL, journal_seq INTEGER NOT NULL, expires_at TEXT NOT NULL,
    PRIMARY KEY (saga_id, journal_seq));
-- Extension: the W3C trace context (traceparent, tracestate) of the span that opened a gate, so
-- that its approval and resume, perhaps in another process, link to the trace that gated
-- (docs/observability.md). Working state beside the request, never evidence: written and pruned
-- by the OpenTelemetry integration only; the journal and its hash rule do not see it.
CREATE TABLE IF NOT EXISTS sagacity_approval_trace (
    saga_id TEXT NOT NULL, journal_seq INTEGER NOT NULL, traceparent TEXT NOT NULL,
    tracestate TEXT NOT NULL DEFAULT '', PRIMARY KEY (saga_id, journal_seq));
-- The journal is append-only: the library never updates or deletes a row, and these triggers
-- make SQLite refuse anyone else who tries through SQL.
CREATE TRIGGER IF NOT EXISTS side_effect_journal_no_update BEFORE UPDATE ON side_effect_journal
BEGIN SELECT RAISE(ABORT, 'side_effect_journal is append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS side_effect_journal_no_delete BEFORE DELETE ON side_effect_journal
BEGIN SELECT RAISE(ABORT, 'side_effect_journal is append-only: DELETE refused'); END;
-- Extension: the saga index (src/sagacity/_index.py): each saga's status and counts folded from
-- its journal, for operator reads that must not fold every journal. Derived, never evidence:
-- `sagacity db reindex` drops and rebuilds it. Reads catch it up from the journal's rowid (rows
-- are only ever appended, so the rowid only grows), noted in sagacity_index_mark; an append
-- writes nothing here.
CREATE TABLE IF NOT EXISTS sagacity_saga_index (
    saga_id TEXT NOT NULL PRIMARY KEY, status TEXT NOT NULL, entry_count INTEGER NOT NULL,
    started_at TEXT NOT NULL, updated_at TEXT NOT NULL, awaiting_approval INTEGER NOT NULL,
    in_doubt INTEGER NOT NULL, compensating INTEGER NOT NULL, broken_at INTEGER,
    broken_message TEXT NOT NULL DEFAULT '', attention INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS idx_saga_index_updated ON sagacity_saga_index (updated_at, saga_id);
CREATE INDEX IF NOT EXISTS idx_saga_index_status ON sagacity_saga_index (status, updated_at, saga_id);
CREATE INDEX IF NOT EXISTS idx_saga_index_attention ON sagacity_saga_index (saga_id) WHERE attention;
-- How many sagas have each status: moved by every catch-up by what it changed, so counting is a
-- read of a few rows however many sagas there are. Seeded from the rows if made after them.
CREATE TABLE IF NOT EXISTS sagacity_saga_counts (status TEXT NOT NULL PRIMARY KEY, sagas BIGINT NOT NULL);
INSERT INTO sagacity_saga_counts (status, sagas)
SELECT status, count(*) FROM sagacity_saga_index
WHERE NOT EXISTS (SELECT 1 FROM sagacity_saga_counts) GROUP BY status;
CREATE TABLE IF NOT EXISTS sagacity_index_mark (name TEXT NOT NULL PRIMARY KEY, value INTEGER NOT NULL);
-- Extension: the log (src/sagacity/checkpoints/_log.py): the order the checkpointer gave the
-- entries, each row inserted once and never changed.
CREATE TABLE IF NOT EXISTS sagacity_log (
    log_index BIGINT PRIMARY KEY, saga_id TEXT NOT NULL, seq BIGINT NOT NULL, hash CHAR(64) NOT NULL,
    UNIQUE (saga_id, seq));
