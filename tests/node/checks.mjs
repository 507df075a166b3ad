// What the Node.js scripts of tests/node share: the client (PGHOST, PGPORT, PGUSER, PGDATABASE
// from the environment; DG_SCHEMA the store's schema), named checks that print "ok" or "FAIL"
// and go on, and the end: exit status 0 only when every check passed.

import pg from "pg";

export const schema = process.env.DG_SCHEMA;
export const client = new pg.Client();
const failures = [];

export async function check(name, body) {
  try {
    await body();
    console.log(`ok   ${name}`);
  } catch (err) {
    failures.push(name);
    console.log(`FAIL ${name}: ${err.stack || err}`);
  }
}

export async function finish() {
  await client.end();
  if (failures.length) {
    console.log(`${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log("all checks passed");
}

export function run(main) {
  main().catch((err) => {
    console.log(`FAIL ${err.stack || err}`);
    process.exit(1);
  });
}
