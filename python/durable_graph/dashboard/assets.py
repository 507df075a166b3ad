"""The dashboard's stylesheet and script, served from the package: nothing is fetched from
elsewhere, and the Content-Security-Policy allows this origin only."""

from __future__ import annotations

CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --bg: #f7f8fa; --card: #fff; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.5rem;
         background: #1d2330; color: #fff; }
header nav a { color: #cfd6e4; margin-right: 1rem; text-decoration: none; }
header nav a[aria-current] { color: #fff; border-bottom: 2px solid #7aa2ff; }
header .readonly { margin-left: auto; font-size: 12px; color: #9aa5ba; }
main { padding: 1rem 1.5rem 3rem; max-width: 1200px; }
h1 { font-size: 22px; margin: .4rem 0 1rem; } h2 { font-size: 17px; margin: 1.6rem 0 .6rem; }
h3 { font-size: 14px; margin: 0 0 .3rem; font-family: ui-monospace, monospace; }
h4 { font-size: 13px; margin: .6rem 0 .3rem; color: var(--muted); }
a { color: #2456c9; }
.stats { display: flex; gap: .8rem; flex-wrap: wrap; }
.stat { display: flex; flex-direction: column; min-width: 110px; padding: .7rem 1rem;
        background: var(--card); border: 1px solid var(--line); border-radius: 8px;
        text-decoration: none; color: var(--fg); }
.stat .count { font-size: 26px; font-weight: 600; } .stat .label { color: var(--muted); }
.stat.state-failed .count { color: #c0392b; } .stat.state-running .count { color: #1f7a4d; }
table { border-collapse: collapse; width: 100%; background: var(--card);
        border: 1px solid var(--line); }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { background: #eef1f6; font-weight: 600; font-size: 12px; color: var(--muted); }
td { word-break: break-all; }
.badge { display: inline-block; padding: 0 .5rem; border-radius: 9px; font-size: 12px;
         background: #e6e9ef; color: var(--fg); vertical-align: middle; }
.badge.state-failed { background: #fbe3e0; color: #a2281b; }
.badge.state-running { background: #dff3e8; color: #1f6d45; }
.badge.state-completed { background: #e3ecfd; color: #1e49a8; }
.badge.state-open { background: #fff3d6; color: #7a5600; }
.worker-state { font-weight: 600; } .worker-state.busy { color: #1f6d45; }
.worker-state.idle { color: var(--muted); }
pre { background: var(--card); border: 1px solid var(--line); padding: .6rem; overflow: auto;
      white-space: pre-wrap; word-break: break-all; }
pre.failure { border-color: #e4a29a; background: #fff6f5; color: #8c2217; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
.checkpoint { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
              padding: .7rem; margin-bottom: .7rem; }
.meta, .empty { color: var(--muted); }
.filters a { margin-right: .6rem; } .filters a[aria-current] { font-weight: 700; }
.live { font-size: 11px; color: #1f7a4d; border: 1px solid #1f7a4d; border-radius: 8px;
        padding: 0 .4rem; vertical-align: middle; }
.live.off { color: var(--muted); border-color: var(--muted); }
tr.new { animation: flash 2s ease-out; }
@keyframes flash { from { background: #fff3b0; } to { background: transparent; } }
"""

JS = """
// The live event tail of a thread page: server-sent events from this dashboard, inserted as
// text (never as markup: the store's values can hold anything).
(function () {
  var table = document.querySelector("table.events");
  if (!table || !window.EventSource) return;
  var tail = document.getElementById("event-tail");
  var badge = document.querySelector(".live");
  var url = "/thread/events?" + new URLSearchParams({
    id: table.dataset.thread, after: table.dataset.after });
  var source = new EventSource(url);
  source.onopen = function () { if (badge) { badge.classList.remove("off"); } };
  source.onerror = function () { if (badge) { badge.classList.add("off"); } };
  source.addEventListener("store-event", function (message) {
    var ev = JSON.parse(message.data);
    if (tail.querySelector('tr[data-seq="' + ev.seq + '"]')) return;
    var row = document.createElement("tr");
    row.dataset.seq = String(ev.seq);
    row.className = "new";
    [String(ev.seq), ev.kind, ev.payload, ev.run_id, ev.created_at].forEach(function (value) {
      var cell = document.createElement("td");
      cell.textContent = value;
      row.appendChild(cell);
    });
    tail.appendChild(row);
    table.dataset.after = String(ev.seq);
  });
})();
"""
