// A chat page on LangGraph's React hook, built at test time (esbuild) by
// tests/test_browser_hook.py: `useStream` from @langchain/langgraph-sdk/react with its default
// options (only apiUrl, assistantId, threadId and onThreadId; `?reconnect=1` adds
// reconnectOnMount, which a reload that re-joins the run needs, and `?history=1`
// fetchStateHistory, which branching needs: the hook's own options for them). The thread's id is
// kept in the page's URL. The test types and clicks; what the page shows is in #messages, #loading,
// #interrupt and #error.
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const params = new URLSearchParams(window.location.search);
const text = (m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content));

function App() {
  const [threadId, setThreadId] = useState(params.get("thread"));
  const options = {
    apiUrl: params.get("api"),
    assistantId: "chat",
    threadId,
    onThreadId: (id) => {
      setThreadId(id);
      const next = new URLSearchParams(window.location.search);
      next.set("thread", id);
      window.history.replaceState(null, "", "?" + next.toString());
    },
  };
  if (params.get("reconnect") === "1") options.reconnectOnMount = true;
  if (params.get("history") === "1") options.fetchStateHistory = true;
  const stream = useStream(options);
  const [draft, setDraft] = useState("");
  const send = (e) => {
    e.preventDefault();
    stream.submit({ messages: [{ type: "human", content: draft }] });
    setDraft("");
  };
  // Edit a human message: a new run from the checkpoint before it (a branch).
  const edit = (message, content) => {
    const meta = stream.getMessagesMetadata(message);
    const parent = meta?.firstSeenState?.parent_checkpoint;
    stream.submit({ messages: [{ type: "human", content }] }, { checkpoint: parent });
  };
  window.__edit = (index, content) => edit(stream.messages[index], content);
  return (
    <div>
      <form onSubmit={send}>
        <input id="draft" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button id="send" type="submit">send</button>
        <button id="stop" type="button" onClick={() => stream.stop()}>stop</button>
      </form>
      <div id="loading">{String(stream.isLoading)}</div>
      <div id="error">{stream.error ? String(stream.error) : ""}</div>
      <div id="interrupt">
        {stream.interrupt ? String(stream.interrupt.value) : ""}
        {stream.interrupt ? (
          <button id="resume" onClick={() => stream.submit(undefined, { command: { resume: "Ada" } })}>
            Ada
          </button>
        ) : null}
      </div>
      <ol id="messages">
        {stream.messages.map((m, i) => (
          <li key={m.id ?? i} data-type={m.type}>{text(m)}</li>
        ))}
      </ol>
    </div>
  );
}

createRoot(document.getElementById("root")).render(<App />);
