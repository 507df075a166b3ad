// A Node.js worker's retry path through the SQL API alone (SPEC §19.3, §23.5): node-postgres and
// sql/README.md only. On a schema installed with psql from sql/install.sql, submits a run, begins
// it (dg_begin_attempt_v2: plan 'fresh'), commits a checkpoint with a next task, fails the entry,
// retries it (dg_retry_v1) and begins the retry: the plan is 'resume' from that checkpoint, never
// 'fresh' (which would apply the input twice); so is a retry of that retry. Then a worker's own
// close keeps its claim, and a put_writes under it is refused (DG103). Run by tests/test_node.py:
//   psql -v schema=s -f sql/install.sql; DG_SCHEMA=s PGHOST=... PGPORT=... node retry.mjs
// Exit status 0 when every check passed; each failure is printed.

import assert from "node:assert/strict";
import { check, client, finish, run, schema } from "./checks.mjs";

const BEGIN = `SELECT entry_id, token, attempt_kind, attempt_number, claim_token, retry_of,
                      latest_checkpoint_id, latest_state, head_checkpoint_id, plan
                 FROM dg_begin_attempt_v2('node-worker', interval '30 seconds',
                                          interval '30 seconds', true, NULL, $1)`;

// dg_finish_attempt_v2 without a commit: close the entry, release the claim.
const FINISH = `SELECT outcome_kind FROM dg_finish_attempt_v2($1, $2, $3, $4, $5, $6,
                  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                  NULL)`;

async function begin(runId) {
  const r = await client.query(BEGIN, [runId]);
  assert.equal(r.rows.length, 1, `begin ${runId}: an entry to begin`);
  return r.rows[0];
}

async function fail(begun, thread) {
  const r = await client.query(FINISH, [begun.entry_id, begun.token, "failed",
                                        JSON.stringify("a tool failed"), thread,
                                        begun.claim_token]);
  assert.equal(r.rows[0].outcome_kind, "failed");
}

async function main() {
  await client.connect();
  await client.query(`SET search_path TO ${schema}`);

  await check("a retry of an admitted, failed entry begins with 'resume', never 'fresh'", async () => {
    const sub = await client.query(
      "SELECT entry_id FROM dg_submit_v1('node-retry', $1, NULL, NULL, 'enqueue', 3)",
      [JSON.stringify({ message: "hi" })]);
    const first = sub.rows[0].entry_id;

    const begun = await begin("run-1");
    assert.equal(begun.entry_id, first);
    assert.equal(begun.plan, "fresh"); // nothing of it applied yet: apply the input
    // The input applied: a checkpoint with a next task to run, under the begun claim.
    await client.query(
      `SELECT checkpoint_id FROM dg_commit_v1('node-retry', $1, 'cp-1', NULL, 'run-1', $2, NULL,
         ARRAY['tool'], ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::timestamptz[], NULL, NULL,
         NULL, NULL)`,
      [begun.claim_token, JSON.stringify({ messages: ["hi"] })]);
    await fail(begun, "node-retry");

    const retry = await client.query("SELECT entry_id, existing FROM dg_retry_v1($1, NULL)", [first]);
    const retryId = retry.rows[0].entry_id;
    const again = await begin("run-2");
    assert.equal(again.entry_id, retryId);
    assert.equal(again.retry_of, first);
    assert.equal(again.attempt_kind, "started");
    assert.equal(again.plan, "resume");
    assert.equal(again.latest_checkpoint_id, "cp-1");
    assert.deepEqual(JSON.parse(again.latest_state), { messages: ["hi"] });
    assert.equal(again.head_checkpoint_id, "cp-1");

    // The retry fails before any commit of its own; its retry still resumes from cp-1.
    await fail(again, "node-retry");
    await client.query("SELECT entry_id FROM dg_retry_v1($1, NULL)", [retryId]);
    const third = await begin("run-3");
    assert.equal(third.retry_of, retryId);
    assert.equal(third.plan, "resume");
    assert.equal(third.latest_checkpoint_id, "cp-1");
    await fail(third, "node-retry");
  });

  await check("a retry of an entry never admitted begins with 'fresh'", async () => {
    const sub = await client.query(
      "SELECT entry_id FROM dg_submit_v1('node-fresh', '1', NULL, NULL, 'enqueue', 3)");
    const begun = await begin("run-4");
    await fail(begun, "node-fresh");
    await client.query("SELECT entry_id FROM dg_retry_v1($1, NULL)", [sub.rows[0].entry_id]);
    const again = await begin("run-5");
    assert.equal(again.plan, "fresh");
    assert.equal(again.latest_checkpoint_id, null);
    await fail(again, "node-fresh");
  });

  await check("put_writes under the claim of a run its worker closed is refused (DG103)", async () => {
    await client.query("SELECT entry_id FROM dg_submit_v1('node-closed', '1', NULL, NULL, 'enqueue', 3)");
    const begun = await begin("run-6");
    await client.query(
      `SELECT checkpoint_id FROM dg_commit_v1('node-closed', $1, 'cp-1', NULL, 'run-6', '{}', NULL,
         ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::timestamptz[], NULL, NULL,
         NULL, NULL)`, [begun.claim_token]);
    // dg_close_v1 closes the entry and leaves the claim held.
    await client.query("SELECT outcome_kind FROM dg_close_v1($1, $2, 'completed', 'null', NULL)",
                       [begun.entry_id, begun.token]);
    let error = null;
    try {
      await client.query(
        "SELECT dg_put_writes_v2('node-closed', $1, 'cp-1', ARRAY['task'], ARRAY['ch'], ARRAY['1'], NULL)",
        [begun.claim_token]);
    } catch (err) {
      error = err;
    }
    assert.ok(error, "expected DG103, put_writes succeeded");
    assert.equal(error.code, "DG103", error.message);
    const got = await client.query("SELECT writes FROM dg_get_v1('node-closed', NULL)");
    assert.deepEqual(got.rows[0].writes, []);
  });

  await finish();
}

run(main);
