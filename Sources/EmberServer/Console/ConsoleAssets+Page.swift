/// The console's static assets, one per file (see ConsoleFront). Plain HTML, CSS and ES modules:
/// no framework, no build step. Raw strings: JavaScript's backslashes and `${}` stay as written.
enum ConsoleAssets {}

extension ConsoleAssets {
    static let indexHTML = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Ember console</title>
<link rel="stylesheet" href="console.css">
<script type="module" src="main.js"></script>
</head>
<body>
<header>
  <span class="brand">Ember</span>
  <nav id="tabs">
    <button data-tab="data" class="active">Data</button>
    <button data-tab="query">Query</button>
    <button data-tab="rules">Rules</button>
    <button data-tab="cluster">Cluster</button>
    <button data-tab="triggers">Triggers</button>
  </nav>
  <form id="signin" class="signin">
    <label>Namespace <input id="ns" placeholder="default" size="10"></label>
    <label>Token <input id="token" type="password" placeholder="admin or user token" size="14"></label>
    <button type="submit" id="signin-button">Sign in</button>
    <button type="button" id="signout-button">Sign out</button>
    <span id="identity" class="identity">anonymous</span>
  </form>
</header>
<main>
  <section id="tab-data" class="tab">
    <div class="toolbar">
      <label>Path <input id="data-root" value="/" size="30"></label>
      <button id="data-go">Open</button>
      <button id="data-export">Export JSON</button>
      <label class="file">Import JSON <input id="data-import" type="file" accept=".json,application/json"></label>
      <progress id="data-progress" max="100" value="0" hidden></progress>
      <span id="data-live" class="live">live: off</span>
    </div>
    <div id="data-status" class="status"></div>
    <div id="tree" class="tree"></div>
  </section>
  <section id="tab-query" class="tab" hidden>
    <form id="query-form" class="grid">
      <label>Path <input id="q-path" value="/" size="30"></label>
      <label>Order by
        <select id="q-order">
          <option value="$key">key</option>
          <option value="$value">value</option>
          <option value="$priority">priority</option>
          <option value="child">child</option>
        </select>
      </label>
      <label>Child <input id="q-child" placeholder="score" size="12"></label>
      <label>startAt <input id="q-start" placeholder="JSON, e.g. 10 or &quot;a&quot;" size="12"></label>
      <label>endAt <input id="q-end" size="12"></label>
      <label>equalTo <input id="q-equal" size="12"></label>
      <label>limitToFirst <input id="q-first" type="number" min="1" size="6"></label>
      <label>limitToLast <input id="q-last" type="number" min="1" size="6"></label>
      <button type="submit" id="q-run">Run</button>
    </form>
    <div id="q-url" class="mono small"></div>
    <pre id="q-result" class="result"></pre>
  </section>
  <section id="tab-rules" class="tab" hidden>
    <div class="columns">
      <div class="column">
        <h2>Rules</h2>
        <div class="editor">
          <pre id="rules-lines" class="lines"></pre>
          <textarea id="rules-text" spellcheck="false" rows="24"></textarea>
        </div>
        <div class="toolbar">
          <button id="rules-load">Reload</button>
          <button id="rules-save">Publish</button>
          <span id="rules-status" class="status"></span>
        </div>
      </div>
      <div class="column">
        <h2>Rules Playground</h2>
        <form id="play-form" class="stack">
          <label>Operation
            <select id="play-type">
              <option value="read">read</option>
              <option value="set">set</option>
              <option value="update">update</option>
            </select>
          </label>
          <label>Path <input id="play-path" value="/" size="30"></label>
          <label>Data (JSON, for set and update) <textarea id="play-data" rows="4">null</textarea></label>
          <label>Auth (JSON: the auth variable, or null) <textarea id="play-auth" rows="3">null</textarea></label>
          <button type="submit" id="play-run">Run simulation</button>
        </form>
        <div id="play-verdict" class="verdict"></div>
        <ol id="play-steps" class="steps"></ol>
        <p class="small">Evaluated on the server against the rules in the editor and the current data; nothing is written.</p>
      </div>
    </div>
  </section>
  <section id="tab-cluster" class="tab" hidden>
    <div id="cluster-summary" class="status"></div>
    <div id="cluster-archive" class="status"></div>
    <table id="cluster-members" class="members">
      <thead><tr><th>Member</th><th>Role</th><th>Alarms</th><th>Disk</th><th>Term</th><th>Commit</th><th>Applied</th><th>Lag</th><th>Connections</th><th>Listeners</th><th>URL</th><th></th></tr></thead>
      <tbody></tbody>
    </table>
    <div id="cluster-check" hidden>
      <button id="cluster-check-run">Check state hashes</button> <span id="cluster-check-summary" class="status"></span>
      <table id="cluster-hashes" class="members">
        <thead><tr><th>Member</th><th>Counted</th><th>State hash</th><th>Against the voters' majority</th></tr></thead>
        <tbody></tbody>
      </table>
    </div>
    <div class="charts">
      <figure><figcaption>Writes/s (this node)</figcaption><svg id="chart-writes" viewBox="0 0 300 80"></svg><span id="writes-now"></span></figure>
      <figure><figcaption>Commit latency, ms (this node)</figcaption><svg id="chart-latency" viewBox="0 0 300 80"></svg><span id="latency-now"></span></figure>
    </div>
  </section>
  <section id="tab-triggers" class="tab" hidden>
    <div id="triggers-status" class="status"></div>
    <table id="triggers-table" class="members">
      <thead><tr><th>Trigger</th><th>Path</th><th>On</th><th>State</th><th>Cursor</th><th>Pending</th><th>Dead letters</th><th>Last error</th><th>Recent deliveries</th><th></th></tr></thead>
      <tbody></tbody>
    </table>
    <pre id="triggers-dead" class="result mono"></pre>
  </section>
</main>
</body>
</html>
"""#

    static let css = #"""
:root { --bg: #f6f7f9; --fg: #1f2430; --muted: #6b7280; --line: #d9dde3; --accent: #e8590c; --ok: #2b8a3e; --bad: #c92a2a; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; gap: 16px; padding: 8px 16px; background: #1f2430; color: #fff; flex-wrap: wrap; }
.brand { font-weight: 700; color: var(--accent); font-size: 18px; }
nav button { background: none; border: 0; color: #cfd3da; padding: 6px 10px; cursor: pointer; font-size: 14px; }
nav button.active { color: #fff; border-bottom: 2px solid var(--accent); }
.signin { margin-left: auto; display: flex; gap: 8px; align-items: center; }
.signin input { padding: 3px 6px; }
.identity { color: #cfd3da; font-size: 12px; }
main { padding: 16px; }
.toolbar { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; margin-bottom: 8px; }
.status { color: var(--muted); min-height: 1.4em; }
.status.error, .error { color: var(--bad); }
.live { font-size: 12px; color: var(--muted); }
.tree { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px; font-family: ui-monospace, monospace; font-size: 13px; }
.node { margin-left: 16px; }
.row { display: flex; align-items: center; gap: 6px; padding: 1px 4px; border-radius: 3px; }
.row:hover { background: #f1f3f5; }
.row .key { color: #364fc7; }
.row .value { color: #1f2430; cursor: text; }
.row .value.string::before, .row .value.string::after { content: '"'; color: var(--muted); }
.row .toggle { width: 14px; cursor: pointer; color: var(--muted); user-select: none; }
.row .actions { visibility: hidden; display: flex; gap: 2px; }
.row:hover .actions { visibility: visible; }
.row .actions button { font-size: 11px; padding: 0 5px; cursor: pointer; }
.more { margin-left: 30px; }
.flash-add { animation: flash-add 1.2s; }
.flash-remove { animation: flash-remove 1.2s; }
@keyframes flash-add { from { background: #b2f2bb; } to { background: transparent; } }
@keyframes flash-remove { from { background: #ffc9c9; } to { background: transparent; } }
.editrow { display: flex; gap: 4px; align-items: center; margin-left: 30px; }
.grid { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; }
.grid label, .stack label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
.stack { display: flex; flex-direction: column; gap: 8px; }
.result { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px; min-height: 60px; max-height: 60vh; overflow: auto; }
.mono { font-family: ui-monospace, monospace; }
.small { font-size: 12px; color: var(--muted); }
.columns { display: flex; gap: 24px; flex-wrap: wrap; }
.column { flex: 1 1 420px; min-width: 320px; }
.editor { display: flex; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
.editor .lines { margin: 0; padding: 6px 4px; color: var(--muted); text-align: right; font: 13px/1.45 ui-monospace, monospace; background: #f1f3f5; user-select: none; }
.editor .lines .bad { color: #fff; background: var(--bad); }
.editor textarea { flex: 1; border: 0; padding: 6px; font: 13px/1.45 ui-monospace, monospace; resize: vertical; white-space: pre; }
.verdict { font-weight: 700; margin-top: 8px; }
.verdict.allowed { color: var(--ok); }
.verdict.denied { color: var(--bad); }
.steps li.true { color: var(--ok); }
.steps li.false { color: var(--bad); }
.steps li.decider { font-weight: 700; }
.members { border-collapse: collapse; background: #fff; width: 100%; }
.members th, .members td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; }
.members tr.leader td:nth-child(2) { color: var(--accent); font-weight: 700; }
.members tr.learner td:first-child { font-style: italic; }
.members td.alarm { color: var(--bad); font-weight: 700; }
.members td.recent { white-space: pre; font-size: 12px; }
.charts { display: flex; gap: 24px; margin-top: 16px; flex-wrap: wrap; }
.charts figure { margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
.charts svg { width: 300px; height: 80px; }
.charts polyline { fill: none; stroke: var(--accent); stroke-width: 1.5; }
"""#
}
