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
