extension ConsoleAssets {
    /// The triggers panel (issue 36): each trigger's replicated state (cursor, pending entries,
    /// dead letters, gap), this node's last error and recent deliveries, polled from
    /// `/.ember/triggers`; pause, resume, and the dead letters shown and replayed.
    static let triggersJS = #"""
import { session, request } from './api.js';

const $ = (id) => document.getElementById(id);
const POLL_MS = 1000;
let timer = null;

function q() { return session.ns ? '?ns=' + encodeURIComponent(session.ns) : ''; }
function cell(tr, text, cls) { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.append(td); return td; }

async function poll() {
  let answer;
  try { answer = await request('GET', '/.ember/triggers' + q()); } catch (err) { $('triggers-status').textContent = err.message; return; }
  const names = Object.keys(answer.triggers || {}).sort();
  $('triggers-status').textContent = names.length ? `${names.length} trigger(s) in namespace ${answer.namespace}`
    : `no triggers in namespace ${answer.namespace}: define them with PUT /.settings/triggers.json (ember triggers set FILE)`;
  const body = $('triggers-table').querySelector('tbody');
  body.replaceChildren();
  for (const name of names) {
    const t = answer.triggers[name], d = t.definition, s = t.state, n = t.node || {};
    const tr = document.createElement('tr');
    tr.dataset.trigger = name;
    cell(tr, name);
    cell(tr, d.path);
    cell(tr, (d.on || []).join(', ') + (d.feed ? ' (feed)' : ''));
    let state = s.paused ? 'paused' : (s.halted ? 'halted: ' + s.halted : (d.feed ? 'feed' : 'active'));
    if (s.behind) state += ` — behind: ${s.gap.skippedEvents} events skipped (index ${s.gap.firstIndex}–${s.gap.lastIndex})`;
    cell(tr, state, 'state' + (s.behind || s.halted ? ' alarm' : ''));
    cell(tr, s.cursor);
    cell(tr, s.pending, 'lag');
    cell(tr, s.deadLetters, 'dead');
    cell(tr, n.lastError || '', 'error');
    const recent = (n.recent || []).slice(-5).map((r) => `${r.outcome === 'delivered' ? '✓' : '✗'} ${r.ids.join(',')}${r.events > r.ids.length ? ` … ${r.lastId} (${r.events} events)` : ''} ${r.millis} ms`).join('\n');
    cell(tr, recent, 'recent mono');
    const actions = cell(tr, '');
    const button = (label, cls, fn) => { const b = document.createElement('button'); b.textContent = label; b.className = cls; b.addEventListener('click', fn); actions.append(b); };
    if (!d.feed) {
      button(s.paused || s.halted ? 'Resume' : 'Pause', s.paused || s.halted ? 'resume' : 'pause',
        () => act('POST', `/.ember/triggers/${encodeURIComponent(name)}/${s.paused || s.halted ? 'resume' : 'pause'}`));
      if (s.deadLetters > 0) {
        button('Dead letters', 'show-dead', () => showDead(name));
        button('Replay', 'replay', () => { if (confirm(`Deliver ${name}'s ${s.deadLetters} dead letter(s) again?`)) act('POST', `/.ember/triggers/${encodeURIComponent(name)}/replay`, { from: 0 }); });
      }
    }
    body.append(tr);
  }
}

async function showDead(name) {
  try {
    const r = await request('GET', `/.ember/triggers/${encodeURIComponent(name)}/dead` + q());
    $('triggers-dead').textContent = `${name}: ` + JSON.stringify(r.deadLetters, null, 2);
  } catch (err) { $('triggers-dead').textContent = err.message; }
}

async function act(method, url, body) {
  try { await request(method, url + q(), body); } catch (err) { alert(err.message); }
  poll();
}

export function show() { if (!timer) { poll(); timer = setInterval(poll, POLL_MS); } }
export function hide() { if (timer) { clearInterval(timer); timer = null; } }
export function reset() { $('triggers-dead').textContent = ''; }
"""#
}
