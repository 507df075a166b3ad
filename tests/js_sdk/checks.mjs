// LangGraph's JavaScript SDK (@langchain/langgraph-sdk's Client, the release installed beside
// this file at test time) against a server: `node checks.mjs URL`. The graphs are
// tests/service_js/langgraph.json's: `agent` (tests/service_app/agent.py) and `nested` (a
// subgraph). Prints one JSON line a check, {"name", "ok", "detail"}; exit 0 when all ran.
import { Client } from "@langchain/langgraph-sdk";

const url = process.argv[2];
const client = new Client({ apiUrl: url });
const REPLY = "I am a durable agent, streaming one token at a time";
const human = (content) => ({ messages: [{ type: "human", content }] });
const checks = [];
const check = (name, fn) => checks.push([name, fn]);
const assert = (cond, why) => {
  if (!cond) throw new Error(why);
};
const lastText = (values) => {
  const messages = values?.messages ?? [];
  const last = messages[messages.length - 1];
  return typeof last?.content === "string" ? last.content : JSON.stringify(last?.content);
};
const collect = async (stream) => {
  const events = [];
  for await (const chunk of stream) events.push(chunk);
  return events;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

check("assistants.search finds the graphs", async () => {
  const found = await client.assistants.search({ limit: 10 });
  const graphs = found.map((a) => a.graph_id).sort();
  assert(graphs.includes("agent") && graphs.includes("nested"), `graphs: ${graphs}`);
});

check("runs.stream values and messages: the reply's tokens, then its values", async () => {
  const thread = await client.threads.create();
  const events = await collect(
    client.runs.stream(thread.thread_id, "agent", {
      input: human("hi"),
      streamMode: ["values", "messages-tuple"],
    }),
  );
  const kinds = events.map((e) => e.event);
  assert(kinds[0] === "metadata", `first event: ${kinds[0]}`);
  const tokens = events.filter((e) => e.event === "messages").map((e) => e.data[0].content);
  assert(tokens.length > 3 && tokens.join("") === REPLY, `tokens: ${JSON.stringify(tokens)}`);
  const values = events.filter((e) => e.event === "values").pop();
  assert(lastText(values.data) === REPLY, `values: ${JSON.stringify(values.data)}`);
});

check("runs.wait answers the thread's values", async () => {
  const thread = await client.threads.create();
  const values = await client.runs.wait(thread.thread_id, "agent", { input: human("lookup x") });
  assert(lastText(values) === "looked up x", JSON.stringify(values));
  const state = await client.threads.getState(thread.thread_id);
  assert(state.values.messages.length === 2, JSON.stringify(state.values));
});

check("an interrupt, resumed with a command", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "agent", { input: human("ask") });
  const state = await client.threads.getState(thread.thread_id);
  const asked = state.tasks.flatMap((t) => t.interrupts).map((i) => i.value);
  assert(asked[0] === "what is your name?", `interrupts: ${JSON.stringify(state.tasks)}`);
  assert(state.next.length === 1 && state.next[0] === "ask", `next: ${state.next}`);
  const got = await client.threads.get(thread.thread_id);
  assert(got.status === "interrupted", `status: ${got.status}`);
  const values = await client.runs.wait(thread.thread_id, "agent", { command: { resume: "Ada" } });
  assert(lastText(values) === "hello Ada", JSON.stringify(values));
});

check("streamSubgraphs with updates: the subgraph's own updates events", async () => {
  const thread = await client.threads.create();
  const events = await collect(
    client.runs.stream(thread.thread_id, "nested", {
      input: { steps: [] },
      streamMode: ["updates"],
      streamSubgraphs: true,
    }),
  );
  const kinds = events.map((e) => e.event);
  const sub = kinds.filter((k) => k.startsWith("updates|review"));
  assert(sub.length === 2, `events: ${JSON.stringify(kinds)}`);
  const nodes = events.filter((e) => e.event.startsWith("updates|")).map((e) => Object.keys(e.data)[0]);
  assert(nodes.join() === "draft,check", `subgraph nodes: ${nodes}`);
  assert(kinds.includes("updates"), `parent updates: ${JSON.stringify(kinds)}`);
});

check("runs.join of an ended run, after a second run: the thread's current values", async () => {
  const thread = await client.threads.create();
  const first = await client.runs.create(thread.thread_id, "agent", { input: human("lookup a") });
  await client.runs.join(thread.thread_id, first.run_id);
  await client.runs.wait(thread.thread_id, "agent", { input: human("lookup b") });
  const values = await client.runs.join(thread.thread_id, first.run_id);
  assert(values.messages.length === 4 && lastText(values) === "looked up b", JSON.stringify(values));
});

check("runs.joinStream of a running run, then runs.get and runs.list", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "agent", {
    input: human("slow 1"),
    streamMode: ["values"],
  });
  const events = await collect(client.runs.joinStream(thread.thread_id, run.run_id));
  const values = events.filter((e) => e.event === "values").pop();
  assert(values && lastText(values.data) === "done", JSON.stringify(events.map((e) => e.event)));
  const got = await client.runs.get(thread.thread_id, run.run_id);
  assert(got.status === "success", `status: ${got.status}`);
  const listed = await client.runs.list(thread.thread_id);
  assert(listed.length === 1 && listed[0].run_id === run.run_id, JSON.stringify(listed));
});

check("runs.cancel of a running run", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "agent", { input: human("slow 5") });
  for (let i = 0; i < 50; i++) {
    if ((await client.runs.get(thread.thread_id, run.run_id)).status === "running") break;
    await sleep(100);
  }
  await client.runs.cancel(thread.thread_id, run.run_id, true);
  const got = await client.runs.get(thread.thread_id, run.run_id);
  assert(["interrupted", "error"].includes(got.status), `status: ${got.status}`);
});

check("history, then a run from an earlier checkpoint (a branch)", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "agent", { input: human("lookup one") });
  await client.runs.wait(thread.thread_id, "agent", { input: human("lookup two") });
  const history = await client.threads.getHistory(thread.thread_id, { limit: 20 });
  const after = history.find((s) => s.values?.messages?.length === 2 && s.next.length === 0);
  assert(after, `history: ${JSON.stringify(history.map((s) => s.next))}`);
  const values = await client.runs.wait(thread.thread_id, "agent", {
    input: human("lookup three"),
    checkpoint: after.checkpoint,
  });
  const texts = values.messages.map((m) => m.content);
  assert(texts.join("|") === "lookup one|looked up one|lookup three|looked up three", texts.join("|"));
});

check("threads.updateState, then getState", async () => {
  const thread = await client.threads.create({ metadata: { owner: "js" } });
  await client.runs.wait(thread.thread_id, "agent", { input: human("lookup q") });
  await client.threads.updateState(thread.thread_id, {
    values: { messages: [{ type: "ai", content: "edited" }] },
    asNode: "chat",
  });
  const state = await client.threads.getState(thread.thread_id);
  assert(lastText(state.values) === "edited", JSON.stringify(state.values));
  const found = await client.threads.search({ metadata: { owner: "js" } });
  assert(found.some((t) => t.thread_id === thread.thread_id), "threads.search by metadata");
});

check("stateless runs.wait (no thread)", async () => {
  const values = await client.runs.wait(null, "agent", { input: human("lookup s") });
  assert(lastText(values) === "looked up s", JSON.stringify(values));
});

check("a failed run streams its error, never a traceback or a path", async () => {
  const thread = await client.threads.create();
  const events = await collect(
    client.runs.stream(thread.thread_id, "agent", { input: human("weather Mars") }),
  );
  const error = events.find((e) => e.event === "error");
  assert(error, `events: ${JSON.stringify(events.map((e) => e.event))}`);
  const text = JSON.stringify(error.data);
  assert(text.includes("ValueError") && text.includes("no station"), text);
  assert(!text.includes("Traceback") && !/\.py\b/.test(text), text);
  const run = (await client.runs.list(thread.thread_id))[0];
  assert(run.status === "error", `status: ${run.status}`);
});

check("store put, get, search, delete", async () => {
  const ns = ["js", String(Date.now())];
  await client.store.putItem(ns, "k", { v: 1 });
  const item = await client.store.getItem(ns, "k");
  assert(item.value.v === 1, JSON.stringify(item));
  const found = await client.store.searchItems(ns);
  assert(found.items.length === 1, JSON.stringify(found));
  await client.store.deleteItem(ns, "k");
  assert((await client.store.getItem(ns, "k")) === null, "deleted");
});

let failed = 0;
for (const [name, fn] of checks) {
  try {
    await fn();
    console.log(JSON.stringify({ name, ok: true }));
  } catch (err) {
    failed += 1;
    console.log(JSON.stringify({ name, ok: false, detail: String(err?.stack ?? err).slice(0, 600) }));
  }
}
process.exit(0);
