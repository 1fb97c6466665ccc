extension ConsoleAssets {
    /// The query panel: Firebase's REST query parameters, the server's answer or error as it is.
    static let queryJS = #"""
import { request, dataURL, splitPath } from './api.js';

const $ = (id) => document.getElementById(id);

// Range values are JSON (10, "a", true, null); a bare word is taken as a string.
function rangeValue(text) {
  if (text.trim() === '') return undefined;
  try { return JSON.stringify(JSON.parse(text)); } catch (e) { return JSON.stringify(text); }
}

async function run(ev) {
  ev.preventDefault();
  const order = $('q-order').value === 'child' ? $('q-child').value.trim() : $('q-order').value;
  const params = { orderBy: JSON.stringify(order) };
  const start = rangeValue($('q-start').value), end = rangeValue($('q-end').value), equal = rangeValue($('q-equal').value);
  if (start !== undefined) params.startAt = start;
  if (end !== undefined) params.endAt = end;
  if (equal !== undefined) params.equalTo = equal;
  if ($('q-first').value) params.limitToFirst = $('q-first').value;
  if ($('q-last').value) params.limitToLast = $('q-last').value;
  const url = dataURL('/' + splitPath($('q-path').value).join('/'), params);
  $('q-url').textContent = 'GET ' + url;
  const out = $('q-result');
  out.classList.remove('error');
  try { out.textContent = JSON.stringify(await request('GET', url), null, 2); }
  catch (err) { out.textContent = err.message; out.classList.add('error'); }
}

let wired = false;
export function show() {
  if (wired) return;
  wired = true;
  $('query-form').addEventListener('submit', run);
  $('q-order').addEventListener('change', () => { $('q-child').disabled = $('q-order').value !== 'child'; });
  $('q-child').disabled = true;
}
"""#

    /// Rules: edit and publish (errors shown at their line), and the Rules Playground (evaluated
    /// by the server's `/.ember/rules/simulate`, which writes nothing).
    static let rulesJS = #"""
import { request, getText, withNs } from './api.js';

const $ = (id) => document.getElementById(id);
let loaded = false;
let badLine = 0;

function drawLines() {
  const n = $('rules-text').value.split('\n').length;
  const lines = $('rules-lines');
  lines.replaceChildren();
  for (let i = 1; i <= n; i++) {
    const s = document.createElement('span');
    s.textContent = i + '\n';
    if (i === badLine) s.className = 'bad';
    lines.append(s);
  }
}

function rulesStatus(text, isError) { const s = $('rules-status'); s.textContent = text; s.classList.toggle('error', !!isError); }

async function load() {
  try {
    $('rules-text').value = await getText(withNs('/.settings/rules.json'));
    badLine = 0;
    rulesStatus('loaded');
    loaded = true;
  } catch (err) { rulesStatus(err.message + ' (sign in with the admin token)', true); }
  drawLines();
}

async function save() {
  try {
    await request('PUT', withNs('/.settings/rules.json'), $('rules-text').value);
    badLine = 0;
    rulesStatus('published');
  } catch (err) {
    const m = /line (\d+)/.exec(err.message);
    badLine = m ? Number(m[1]) : 0;
    rulesStatus(err.message, true);
  }
  drawLines();
}

async function simulate(ev) {
  ev.preventDefault();
  const verdict = $('play-verdict'), steps = $('play-steps');
  steps.replaceChildren();
  verdict.className = 'verdict';
  let body;
  try {
    body = { type: $('play-type').value, path: $('play-path').value || '/', auth: JSON.parse($('play-auth').value || 'null') };
    if (body.type !== 'read') body.data = JSON.parse($('play-data').value || 'null');
    if (loaded) body.rules = $('rules-text').value;
  } catch (err) { verdict.textContent = 'Data and auth must be JSON: ' + err.message; verdict.classList.add('denied'); return; }
  try {
    const r = await request('POST', withNs('/.ember/rules/simulate'), body);
    verdict.textContent = r.reason;
    verdict.classList.add(r.allowed ? 'allowed' : 'denied');
    for (const s of r.steps) {
      const li = document.createElement('li');
      li.textContent = `${s.kind} at ${s.location} (${s.path}): ${s.rule} → ${s.result}`;
      li.className = String(s.result);
      if (r.decidedBy && s.kind === r.decidedBy.kind && s.path === r.decidedBy.path && s.rule === r.decidedBy.rule) li.classList.add('decider');
      steps.append(li);
    }
  } catch (err) { verdict.textContent = err.message; verdict.classList.add('denied'); }
}

let wired = false;
export function show() {
  if (!wired) {
    wired = true;
    $('rules-load').addEventListener('click', load);
    $('rules-save').addEventListener('click', save);
    $('rules-text').addEventListener('input', drawLines);
    $('play-form').addEventListener('submit', simulate);
  }
  if (!loaded) load();
}
export function reset() { loaded = false; }
"""#
}
