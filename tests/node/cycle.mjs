// A Node.js developer's view of durable_graph (issue #11): node-postgres and sql/README.md only.
// On a schema installed with psql from sql/install.sql, drives a full cycle through the dg_* functions, and
// checks that every bad-input class gets DG000 with nothing written (every table dumped before
// and after). Run by tests/test_node.py against the test server, in two steps:
//   psql -v schema=s -f sql/install.sql; DG_SCHEMA=s PGHOST=... PGPORT=... node cycle.mjs
//   (Python then submits {"n": 1, "list": [1, 2]} with key py-key to thread py-thread)
//   DG_SCHEMA=s DG_PY_ENTRY=<its entry id> PGHOST=... node cycle.mjs identity
// Exit status 0 when every check passed; each failure is printed.

import assert from "node:assert/strict";
import { check, client, finish, run, schema } from "./checks.mjs";

const TABLES = ["threads", "checkpoints", "pending_writes", "events", "effects",
                "queue_entries", "queue_attempts", "limits"];

async function dump() {
  const out = {};
  for (const t of TABLES) {
    const r = await client.query(`SELECT x::text AS row FROM ${t} x ORDER BY 1`);
    out[t] = r.rows.map((x) => x.row);
  }
  return out;
}

// The call must fail with DG000 whose message names `param`, and write nothing.
async function refused(param, text, values) {
  const before = await dump();
  let error = null;
  try {
    await client.query(text, values);
  } catch (err) {
    error = err;
  }
  assert.ok(error, `expected DG000 for ${param}, the call succeeded`);
  assert.equal(error.code, "DG000", `${param}: got ${error.code}: ${error.message}`);
  assert.match(error.message, new RegExp(param.replace(/[[\]]/g, "\\$&")), error.message);
  assert.deepEqual(await dump(), before, `${param}: something was written`);
}

const deep = (n) => "[".repeat(n) + "]".repeat(n);

async function identity() {
  await check("keyed submit with 1.0 gets the ticket Python's 1 got", async () => {
    const r = await client.query(
      "SELECT entry_id, existing FROM dg_submit_v1('py-thread', $1, NULL, 'py-key', 'enqueue', 3)",
      ['{ "list": [1e0, 2.0], "n": 1.0 }']);
    assert.deepEqual(r.rows[0], { entry_id: process.env.DG_PY_ENTRY, existing: true });
  });
  await check("keyed submit with a different value is refused (DG101)", async () => {
    await assert.rejects(
      client.query(
        "SELECT * FROM dg_submit_v1('py-thread', $1, NULL, 'py-key', 'enqueue', 3)",
        ['{"list": [1, 2], "n": 1.5}']),
      (err) => err.code === "DG101");
  });
}

async function main() {
  await client.connect();
  if (process.argv[2] === "identity") {
    await client.query(`SET search_path TO ${schema}`);
    await identity();
    return finish();
  }
  // The schema was installed as a DBA would, with psql alone (`psql -v schema=S -f
  // sql/install.sql`, SPEC §10.7): the script uses psql meta-commands, so it is not one query.
  await client.query(`SET search_path TO ${schema}`);

  await check("full cycle: submit, lease, record_attempt, claim, commit, close, reads", async () => {
    const sub = await client.query(
      "SELECT entry_id, existing FROM dg_submit_v1($1, $2, NULL, 'node-key', 'enqueue', 3)",
      ["node-thread", JSON.stringify({ q: "hi", n: 1.5 })]);
    const entryId = sub.rows[0].entry_id; // bigint arrives as a string: keep it as text
    assert.equal(typeof entryId, "string");
    assert.equal(sub.rows[0].existing, false);

    const lease = await client.query(
      "SELECT entry_id, token, input FROM dg_lease_v1('node-worker', interval '30 seconds', true, NULL, NULL)");
    assert.equal(lease.rows[0].entry_id, entryId);
    const token = lease.rows[0].token;
    assert.deepEqual(JSON.parse(lease.rows[0].input), { q: "hi", n: 1.5 }); // text column: raw

    const att = await client.query(
      "SELECT attempt_kind, attempt_number FROM dg_record_attempt_v1($1, $2, 'run-1', NULL)",
      [entryId, token]);
    assert.deepEqual(att.rows[0], { attempt_kind: "started", attempt_number: 1 });

    const claim = await client.query(
      "SELECT token FROM dg_claim_v1('node-thread', 'run-1', interval '30 seconds')");
    const claimToken = claim.rows[0].token;
    const commit = await client.query(
      `SELECT checkpoint_id, seq, writes FROM dg_commit_v1('node-thread', $1, 'cp-1', NULL,
         'run-1', $2, NULL, ARRAY[]::text[], ARRAY['node.step'], ARRAY[$3], ARRAY[NULL]::timestamptz[],
         NULL, NULL, NULL, NULL)`,
      [claimToken, JSON.stringify({ answer: 42 }), JSON.stringify({ step: 1 })]);
    assert.equal(commit.rows[0].seq, "2"); // one event, then store.checkpoint
    assert.deepEqual(commit.rows[0].writes, []); // json column: parsed by node-postgres

    const closed = await client.query(
      "SELECT outcome_kind, outcome_detail, closed_at_seq FROM dg_close_v1($1, $2, 'completed', $3, NULL)",
      [entryId, token, JSON.stringify({ ok: true })]);
    assert.deepEqual(closed.rows[0], { outcome_kind: "completed", outcome_detail: '{"ok":true}',
                                       closed_at_seq: "2" });

    const got = await client.query("SELECT state FROM dg_get_v1('node-thread', NULL)");
    assert.deepEqual(JSON.parse(got.rows[0].state), { answer: 42 });
    const hist = await client.query("SELECT checkpoint_id FROM dg_history_v1('node-thread', NULL, 10)");
    assert.deepEqual(hist.rows.map((r) => r.checkpoint_id), ["cp-1"]);
    const events = await client.query(
      "SELECT seq, kind, payload FROM dg_events_after_v1('node-thread', 0, 100)");
    assert.deepEqual(events.rows.map((r) => r.kind), ["node.step", "store.checkpoint"]);
    const entry = await client.query(
      "SELECT outcome_kind, attempts FROM dg_entry_v1($1, NULL)", [entryId]);
    assert.equal(entry.rows[0].attempts[0].run_id, "run-1");
    const open = await client.query("SELECT entry_id FROM dg_open_entries_v1(true, NULL, NULL, NULL, 100)");
    assert.equal(open.rows.length, 0);
    const kids = await client.query("SELECT thread_id FROM dg_children_v1('node-thread', NULL, 100)");
    assert.equal(kids.rows.length, 0);
  });

  // A thread with a live claim, for the claimed-write cases below.
  const c = await client.query("SELECT token FROM dg_claim_v1('bad-thread', 'h', interval '1 hour')");
  const tok = c.rows[0].token;
  await client.query(
    `SELECT * FROM dg_commit_v1('bad-thread', $1, 'b1', NULL, 'r', '{}', NULL, ARRAY[]::text[],
       ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::timestamptz[], NULL, NULL, NULL, NULL)`, [tok]);
  const COMMIT = `SELECT * FROM dg_commit_v1('bad-thread', $1, 'b2', 'b1', 'r', $2, NULL,
       ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::timestamptz[], NULL, NULL, NULL, NULL)`;
  const SUBMIT = "SELECT * FROM dg_submit_v1($1, $2, NULL, NULL, 'enqueue', 3)";

  // Names a client of an earlier commit calls, deprecated in 0.2.0 (sql/README.md "Deprecated
  // functions"): they answer as they did.
  await check("deprecated dg_put_writes_v1 and dg_workers_v1 answer as before", async () => {
    await client.query(
      "SELECT dg_put_writes_v1('bad-thread', $1, 'b1', ARRAY['t'], ARRAY['old'], ARRAY['1'])", [tok]);
    const got = await client.query("SELECT writes FROM dg_get_v1('bad-thread', 'b1')");
    assert.deepEqual(got.rows[0].writes.map((w) => [w.channel, w.task_path]), [["old", ""]]);
    await client.query("SELECT * FROM dg_worker_heartbeat_v1('node-w', 'host', 1, NULL, 'idle')");
    const ws = await client.query("SELECT holder FROM dg_workers_v1(interval '1 minute')");
    assert.deepEqual(ws.rows.map((r) => r.holder), ["node-w"]);
  });

  const cases = [
    ["non-JSON submit input {\"a\":", "input", SUBMIT, ["t", '{"a":']],
    ["non-JSON submit input nope", "input", SUBMIT, ["t", "nope"]],
    ["non-JSON commit state", "state", COMMIT, [tok, "nope"]],
    ["non-JSON pending write", "values[1]",
     "SELECT dg_put_writes_v2('bad-thread', $1, 'b1', ARRAY['task'], ARRAY['ch'], ARRAY[$2], NULL)",
     [tok, "{"]],
    ["non-JSON pending write, deprecated dg_put_writes_v1", "values[1]",
     "SELECT dg_put_writes_v1('bad-thread', $1, 'b1', ARRAY['task'], ARRAY['ch'], ARRAY[$2])",
     [tok, "{"]],
    ["negative seen_within, deprecated dg_workers_v1", "seen_within",
     "SELECT * FROM dg_workers_v1($1::interval)", ["-1 minute"]],
    ["non-JSON event payload", "payloads[1]",
     "SELECT * FROM dg_append_events_v1('bad-thread', $1, ARRAY['k'], ARRAY[$2], ARRAY[NULL]::timestamptz[], NULL)",
     [tok, "nope"]],
    ["non-JSON effect value", "value",
     "SELECT * FROM dg_record_effect_v1('bad-thread', $1, 'k', $2, NULL)", [tok, "{x"]],
    ["100,000-deep JSON", "input", SUBMIT, ["t", deep(100000)]],
    ["513-deep JSON", "state", COMMIT, [tok, deep(513)]],
    ["NaN", "input", SUBMIT, ["t", "NaN"]],
    ["lone surrogate", "input", SUBMIT, ["t", '"\\ud800"']],
    ["oversize value (64 MiB + 1)", "max_value_bytes", SUBMIT,
     ["t", JSON.stringify("x".repeat(64 * 1024 * 1024 - 1))]],
    ["513-byte thread id", "thread_id", SUBMIT, ["x".repeat(513), "1"]],
    ["empty thread id", "thread_id", SUBMIT, ["", "1"]],
    ["514-byte holder", "holder",
     "SELECT * FROM dg_lease_v1($1, interval '30 seconds', true, NULL, NULL)", ["h".repeat(514)]],
    ["1,000,000-year ttl", "ttl",
     "SELECT * FROM dg_claim_v1('t2', 'h', $1::interval)", ["1000000 years"]],
    ["negative limit", "limit", "SELECT * FROM dg_history_v1('bad-thread', NULL, $1)", [-1]],
    ["negative events limit", "limit", "SELECT * FROM dg_events_after_v1('bad-thread', 0, $1)", [-5]],
    ["bad mode", "mode", "SELECT * FROM dg_submit_v1('t', '1', NULL, NULL, $1, 3)", ["later"]],
    ["bad outcome kind", "outcome_kind",
     "SELECT * FROM dg_close_v1(1, 1, $1, '1', NULL)", ["done"]],
    ["bad cancel reason", "outcome_detail",
     "SELECT * FROM dg_close_v1(1, 1, 'cancelled', $1, NULL)", ['"bored"']],
  ];
  for (const [name, param, text, values] of cases) {
    await check(`bad input refused with DG000, nothing written: ${name}`,
                () => refused(param, text, values));
  }

  return finish();
}

run(main);
