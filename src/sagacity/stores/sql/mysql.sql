-- SPEC §2 in MariaDB / MySQL types. Every text column compares byte for byte, as SQLite's and
-- PostgreSQL's do: the tables' collation is the server's binary NO PAD one (sagacity_collation is
-- replaced by utf8mb4_nopad_bin on MariaDB, utf8mb4_0900_bin on MySQL), so 'a', 'A', 'a ' and 'á'
-- are four sagas. utf8mb4 holds every Unicode character, 4-byte ones too. Saga ids are at most 512
-- characters (a key is at most 3072 bytes). Timestamps are DATETIME(6): UTC wall time with
-- microseconds, never converted by a session time zone (TIMESTAMP would be, and ends in 2038).
-- No secondary index on saga_id: the primary key (saga_id, seq) serves every lookup by saga, as
-- on SQLite.
CREATE TABLE IF NOT EXISTS side_effect_journal (
    saga_id VARCHAR(512) NOT NULL, seq BIGINT NOT NULL, tool_name TEXT NOT NULL, phase VARCHAR(32) NOT NULL,
    input LONGTEXT NOT NULL DEFAULT (''), payload LONGTEXT NOT NULL DEFAULT (''), timestamp DATETIME(6) NOT NULL,
    hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, PRIMARY KEY (saga_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
CREATE TABLE IF NOT EXISTS sagacity_approval_request (
    saga_id VARCHAR(512) NOT NULL, journal_seq BIGINT NOT NULL, tool_name TEXT NOT NULL,
    input LONGTEXT NOT NULL DEFAULT (''), input_hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at DATETIME(6) NOT NULL, PRIMARY KEY (saga_id, journal_seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
-- Extension: when a pending request expires (beside the shared table, which stays as SPEC has it).
CREATE TABLE IF NOT EXISTS sagacity_approval_expiry (
    saga_id VARCHAR(512) NOT NULL, journal_seq BIGINT NOT NULL, expires_at DATETIME(6) NOT NULL,
    PRIMARY KEY (saga_id, journal_seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
-- Extension: the W3C trace context of the span that opened a gate (docs/observability.md).
CREATE TABLE IF NOT EXISTS sagacity_approval_trace (
    saga_id VARCHAR(512) NOT NULL, journal_seq BIGINT NOT NULL, traceparent TEXT NOT NULL,
    tracestate TEXT NOT NULL DEFAULT (''), PRIMARY KEY (saga_id, journal_seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
-- Extension: the saga index (src/sagacity/_index.py), derived, never evidence.
CREATE TABLE IF NOT EXISTS sagacity_saga_index (
    saga_id VARCHAR(512) NOT NULL PRIMARY KEY, status VARCHAR(32) NOT NULL, entry_count BIGINT NOT NULL,
    started_at DATETIME(6) NOT NULL, updated_at DATETIME(6) NOT NULL, awaiting_approval INTEGER NOT NULL,
    in_doubt INTEGER NOT NULL, compensating BOOLEAN NOT NULL, broken_at BIGINT,
    broken_message LONGTEXT NOT NULL DEFAULT (''), attention BOOLEAN NOT NULL,
    KEY idx_saga_index_updated (updated_at, saga_id),
    KEY idx_saga_index_status (status, updated_at, saga_id),
    KEY idx_saga_index_attention (attention, saga_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
CREATE TABLE IF NOT EXISTS sagacity_saga_counts (
    status VARCHAR(32) NOT NULL PRIMARY KEY, sagas BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
INSERT INTO sagacity_saga_counts (status, sagas)
SELECT status, count(*) FROM sagacity_saga_index
WHERE NOT EXISTS (SELECT 1 FROM sagacity_saga_counts) GROUP BY status;
-- The row a catch-up locks (FOR UPDATE) so catch-ups queue; writers never touch it.
CREATE TABLE IF NOT EXISTS sagacity_index_mark (
    name VARCHAR(64) NOT NULL PRIMARY KEY, value BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
INSERT IGNORE INTO sagacity_index_mark (name, value) VALUES ('catch-up', 0);
-- Sagas whose journal changed since the index last looked, noted by the triggers below in the
-- writer's own transaction, whoever wrote (this library, another implementation, a person with
-- the mysql client). A trigger runs with its definer's privileges, so an append-only role needs
-- none on this table. TRUNCATE fires no trigger: run `sagacity db reindex` after one.
CREATE TABLE IF NOT EXISTS sagacity_index_dirty (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, saga_id VARCHAR(512) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
-- Triggers are created only where missing (no drop and re-create, which would leave a moment
-- in which an append is not noted).
CREATE TRIGGER sagacity_index_insert AFTER INSERT ON side_effect_journal FOR EACH ROW
BEGIN
    INSERT INTO sagacity_index_dirty (saga_id) VALUES (NEW.saga_id);
END;
CREATE TRIGGER sagacity_index_update AFTER UPDATE ON side_effect_journal FOR EACH ROW
BEGIN
    INSERT INTO sagacity_index_dirty (saga_id) VALUES (OLD.saga_id);
    IF NEW.saga_id <> OLD.saga_id THEN
        INSERT INTO sagacity_index_dirty (saga_id) VALUES (NEW.saga_id);
    END IF;
END;
CREATE TRIGGER sagacity_index_delete AFTER DELETE ON side_effect_journal FOR EACH ROW
BEGIN
    INSERT INTO sagacity_index_dirty (saga_id) VALUES (OLD.saga_id);
END;
-- A journal that was there before the index: every saga not yet indexed is noted once.
INSERT INTO sagacity_index_dirty (saga_id)
SELECT DISTINCT j.saga_id FROM side_effect_journal j
WHERE NOT EXISTS (SELECT 1 FROM sagacity_saga_index i WHERE i.saga_id = j.saga_id)
  AND NOT EXISTS (SELECT 1 FROM sagacity_index_dirty d WHERE d.saga_id = j.saga_id);
-- Extension: the log (src/sagacity/checkpoints/_log.py): the order the checkpointer gave the
-- entries, each row inserted once and never changed; ids and hashes typed as in the journal.
CREATE TABLE IF NOT EXISTS sagacity_log (
    log_index BIGINT PRIMARY KEY, saga_id VARCHAR(512) NOT NULL, seq BIGINT NOT NULL,
    hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, UNIQUE (saga_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=sagacity_collation;
