-- A store written by schema version 1 (durable_graph before the embedded rule set), as
-- sqlite3's iterdump() gave it; tests/test_sqlite.py opens it to prove the migration.
BEGIN TRANSACTION;
CREATE TABLE attempts (
        entry_id   INTEGER NOT NULL,
        number     INTEGER NOT NULL,
        thread_id  TEXT NOT NULL,
        run_id     TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        PRIMARY KEY (entry_id, number)
    ) WITHOUT ROWID
    ;
INSERT INTO "attempts" VALUES(1,1,'t1','r9',1700000000000000);
CREATE TABLE checkpoints (
        thread_id     TEXT NOT NULL,
        seq           INTEGER NOT NULL,
        checkpoint_id TEXT NOT NULL,
        parent_id     TEXT,
        run_id        TEXT NOT NULL,
        state         TEXT NOT NULL,
        metadata      TEXT NOT NULL,
        next          TEXT NOT NULL,
        created_at    INTEGER NOT NULL,
        committed_at  INTEGER NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID
    ;
INSERT INTO "checkpoints" VALUES('t1',2,'c1',NULL,'r1','{"a":1}','null','[]',1700000000000000,1700000000000000);
INSERT INTO "checkpoints" VALUES('t1',3,'c2','c1','r2','{"a":2}','null','[]',1700000000000000,1700000000000000);
CREATE TABLE claims (
        thread_id  TEXT PRIMARY KEY,
        token      INTEGER NOT NULL,
        holder     TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        ttl        INTEGER NOT NULL
    ) WITHOUT ROWID
    ;
INSERT INTO "claims" VALUES('t1',1,'h',1700172800000000,172800000000);
CREATE TABLE counters (
        name  TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID
    ;
INSERT INTO "counters" VALUES('first_commit',2);
INSERT INTO "counters" VALUES('token',5);
CREATE TABLE effects (
        thread_id   TEXT NOT NULL,
        key         TEXT NOT NULL,
        value       TEXT NOT NULL,
        run_id      TEXT,
        recorded_at INTEGER NOT NULL,
        PRIMARY KEY (thread_id, key)
    ) WITHOUT ROWID
    ;
INSERT INTO "effects" VALUES('t1','k','{"v":1}','r1',1700000000000000);
CREATE TABLE entries (
        entry_id         INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant           TEXT,
        thread_id        TEXT NOT NULL,
        key              TEXT,
        input            TEXT NOT NULL,
        mode             TEXT NOT NULL,
        max_attempts     INTEGER NOT NULL,
        attempt_count    INTEGER NOT NULL DEFAULT 0,
        admitted         INTEGER NOT NULL DEFAULT 0,
        thread_deleted   INTEGER NOT NULL DEFAULT 0,
        submitted_at     INTEGER NOT NULL,
        lease_token      INTEGER,
        lease_holder     TEXT,
        lease_expires_at INTEGER,
        lease_ttl        INTEGER,
        outcome_kind     TEXT,
        outcome_detail   TEXT,
        closed_at        INTEGER,
        closed_at_seq    INTEGER
    );
INSERT INTO "entries" VALUES(1,NULL,'t1','k1','{"n":1}','enqueue',3,1,0,0,1700000000000000,3,'w',1700000300000000,300000000,NULL,NULL,NULL,NULL);
INSERT INTO "entries" VALUES(2,NULL,'t1',NULL,'{"n":2}','enqueue',3,0,0,0,1700000000000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
CREATE TABLE events (
        thread_id    TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        kind         TEXT NOT NULL,
        payload      TEXT NOT NULL,
        run_id       TEXT,
        created_at   INTEGER NOT NULL,
        committed_at INTEGER NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID
    ;
INSERT INTO "events" VALUES('t1',1,'note','{"x":1}','r1',1700000000000000,1700000000000000);
INSERT INTO "events" VALUES('t1',2,'store.checkpoint','{"checkpoint_id":"c1","run_id":"r1"}','r1',1700000000000000,1700000000000000);
INSERT INTO "events" VALUES('t1',3,'store.checkpoint','{"checkpoint_id":"c2","run_id":"r2"}','r2',1700000000000000,1700000000000000);
CREATE TABLE threads (
        thread_id          TEXT PRIMARY KEY,
        parent_thread_id   TEXT,
        created_at         INTEGER NOT NULL,
        updated_at         INTEGER NOT NULL,
        last_seq           INTEGER NOT NULL,
        first_commit_order INTEGER NOT NULL,
        head_id            TEXT
    ) WITHOUT ROWID
    ;
INSERT INTO "threads" VALUES('t1',NULL,1700000000000000,1700000000000000,3,1,'c2');
CREATE TABLE tombstones (
        thread_id TEXT PRIMARY KEY,
        last_seq  INTEGER NOT NULL
    ) WITHOUT ROWID
    ;
INSERT INTO "tombstones" VALUES('gone',1);
CREATE TABLE writes (
        thread_id     TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        task_id       TEXT NOT NULL,
        channel       TEXT NOT NULL,
        idx           INTEGER NOT NULL,
        value         TEXT NOT NULL,
        UNIQUE (thread_id, checkpoint_id, task_id, channel, idx)
    );
INSERT INTO "writes" VALUES('t1','c1','task','ch',0,'1');
INSERT INTO "writes" VALUES('t1','c1','task','ch',1,'2');
CREATE INDEX threads_by_parent ON threads (parent_thread_id, first_commit_order);
CREATE UNIQUE INDEX checkpoints_by_id ON checkpoints (thread_id, checkpoint_id);
CREATE INDEX checkpoints_by_run ON checkpoints (thread_id, run_id, seq);
CREATE INDEX entries_open ON entries (thread_id, entry_id) WHERE outcome_kind IS NULL;
CREATE INDEX entries_by_thread ON entries (thread_id);
CREATE INDEX entries_by_key ON entries (key, tenant) WHERE key IS NOT NULL;
CREATE INDEX entries_closed ON entries (closed_at, entry_id) WHERE outcome_kind IS NOT NULL;
CREATE INDEX attempts_by_run ON attempts (thread_id, run_id);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('entries',4);
COMMIT;
