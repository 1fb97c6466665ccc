extension ConsoleAssets {
    /// The cluster dashboard: every member's `/.ember/status` and this node's `/metrics`, polled;
    /// leader transfer and member removal behind a confirm.
    static let clusterJS = #"""
import { request } from './api.js';

const $ = (id) => document.getElementById(id);
const POLL_MS = 1000;
const HISTORY = 60;   // points per chart (one a second)
let timer = null;
const writes = [], latency = [];
let lastMetrics = null;

function cell(tr, text) { const td = document.createElement('td'); td.textContent = text; tr.append(td); return td; }

async function statusOf(url) {
  try { const r = await fetch(url.replace(/\/$/, '') + '/.ember/status'); return r.ok ? await r.json() : null; } catch (e) { return null; }
}

async function poll() {
  let self;
  try { self = await request('GET', '/.ember/status'); } catch (err) { $('cluster-summary').textContent = err.message; return; }
  const urls = Object.assign({}, self.clientURLs || {});
  for (const [id, m] of Object.entries(self.members || {})) if (m && m.url) urls[id] = m.url;
  const ids = (self.voters && self.voters.length ? self.voters : Object.keys(urls)).slice().sort();
  if (!ids.includes(self.id)) ids.push(self.id);
  const statuses = {};
  await Promise.all(ids.map(async (id) => { statuses[id] = id === self.id ? self : (urls[id] ? await statusOf(urls[id]) : null); }));
  const leaderId = self.leader || Object.keys(statuses).find((id) => statuses[id] && statuses[id].role === 'leader');
  const leader = leaderId ? statuses[leaderId] : null;
  $('cluster-summary').textContent = self.role === 'single' || !self.voters
    ? `single node ${self.id || ''}: applied ${self.appliedIndex}`
    : `${ids.length} members, leader ${leaderId || 'none'}, term ${self.term}; this node: ${self.id} (${self.role})`;
  // The point-in-time archive as the node writing it (the leader) reports it (issue 37).
  const arch = (leader && leader.archive) || self.archive;
  $('cluster-archive').textContent = arch
    ? `archive ${arch.location}: through index ${arch.archivedThrough}, lag ${arch.lagEntries} entries / ${Number(arch.lagSeconds).toFixed(1)} s; `
      + `last segment ${arch.lastSegmentAt || '-'}, last base ${arch.lastBaseAt || '-'}, window from ${arch.windowStart || '-'}`
      + (arch.gaps && arch.gaps.length ? `; GAPS: ${arch.gaps.join(', ')}` : '') + (arch.lastError ? `; error: ${arch.lastError}` : '')
    : '';
  const body = $('cluster-members').querySelector('tbody');
  body.replaceChildren();
  for (const id of ids) {
    const s = statuses[id];
    const tr = document.createElement('tr');
    tr.dataset.member = id;
    if (id === leaderId) tr.classList.add('leader');
    cell(tr, id + (id === self.id ? ' (this node)' : ''));
    cell(tr, s ? s.role : 'unreachable');
    // NOSPACE (writes refused) and CORRUPT (serves no data; OPERATIONS.md says how to repair).
    const alarms = s && s.alarms ? s.alarms : [];
    const a = cell(tr, s ? (alarms.map((x) => x.alarm).join(', ') || 'none') : '');
    if (alarms.length) { a.className = 'alarm'; a.title = alarms.map((x) => `${x.alarm}: ${x.message}`).join('\n'); }
    // The data file and its free pages: what `ember defrag` would give back (issue 41).
    const st = s && s.storage;
    const d = cell(tr, st && st.fileBytes !== undefined ? `${mib(st.fileBytes)} MiB, ${percent(st.freeBytes, st.fileBytes)} % free` : '');
    d.className = 'disk';
    if (st && st.fileBytes !== undefined) {
      d.title = `data file ${st.fileBytes} bytes; free pages ${st.freeBytes} bytes` + (st.defragRunning ? '; defrag running' : '')
        + (st.lastDefrag ? `; last defrag ${mib(st.lastDefrag.bytesBefore)} → ${mib(st.lastDefrag.bytesAfter)} MiB` : '');
    }
    cell(tr, s ? s.term : '');
    cell(tr, s ? s.commitIndex : '');
    cell(tr, s ? s.appliedIndex : '');
    const match = leader && leader.peers && leader.peers[id] ? leader.peers[id].matchIndex : null;
    cell(tr, id === leaderId ? 0 : (match !== null && leader ? Math.max(0, leader.commitIndex - match) : ''));
    cell(tr, s ? s.connections : '');
    cell(tr, s ? s.listeners : '');
    cell(tr, urls[id] || '');
    const actions = cell(tr, '');
    if (self.voters && ids.length > 1) {
      if (id !== leaderId) {
        const t = document.createElement('button'); t.textContent = 'Make leader'; t.className = 'transfer';
        t.addEventListener('click', () => act(`Transfer leadership to ${id}?`, 'POST', '/.ember/leader/transfer', { to: id }));
        actions.append(t);
      }
      const r = document.createElement('button'); r.textContent = 'Remove'; r.className = 'remove';
      r.addEventListener('click', () => act(`Remove ${id} from the cluster? It stops serving writes.`, 'DELETE', '/.ember/members/' + encodeURIComponent(id)));
      actions.append(r);
    }
    body.append(tr);
  }
  await pollMetrics();
}

function mib(bytes) { return (bytes / 1048576).toFixed(1); }
function percent(part, whole) { return whole > 0 ? Math.round(100 * part / whole) : 0; }

async function act(question, method, url, body) {
  if (!confirm(question)) return;
  try { await request(method, url, body); } catch (err) { alert(err.message); }
  poll();
}

// Prometheus text: the sum of every sample of `name` (all label sets).
function metric(text, name) {
  let sum = 0, seen = false;
  for (const line of text.split('\n')) {
    if (line.startsWith(name + ' ') || line.startsWith(name + '{')) { sum += Number(line.slice(line.lastIndexOf(' ') + 1)); seen = true; }
  }
  return seen ? sum : null;
}

async function pollMetrics() {
  let text;
  try { const r = await fetch('/metrics'); if (!r.ok) return; text = await r.text(); } catch (e) { return; }
  const now = { t: performance.now(), writes: metric(text, 'ember_client_writes_total'),
    latSum: metric(text, 'ember_commit_latency_seconds_sum'), latCount: metric(text, 'ember_commit_latency_seconds_count') };
  if (lastMetrics) {
    const dt = (now.t - lastMetrics.t) / 1000;
    if (dt > 0 && now.writes !== null) push(writes, (now.writes - lastMetrics.writes) / dt);
    const dc = (now.latCount || 0) - (lastMetrics.latCount || 0);
    push(latency, dc > 0 ? 1000 * ((now.latSum || 0) - (lastMetrics.latSum || 0)) / dc : 0);
  }
  lastMetrics = now;
  chart($('chart-writes'), writes); $('writes-now').textContent = writes.length ? writes[writes.length - 1].toFixed(0) + ' writes/s' : '';
  chart($('chart-latency'), latency); $('latency-now').textContent = latency.length ? latency[latency.length - 1].toFixed(2) + ' ms' : '';
}

function push(series, v) { series.push(v); if (series.length > HISTORY) series.shift(); }

function chart(svg, series) {
  const max = Math.max(1, ...series);
  const pts = series.map((v, i) => `${(i * 300 / (HISTORY - 1)).toFixed(1)},${(78 - 76 * v / max).toFixed(1)}`).join(' ');
  const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
  line.setAttribute('points', pts);
  svg.replaceChildren(line);
}

export function show() { if (!timer) { poll(); timer = setInterval(poll, POLL_MS); } }
export function hide() { if (timer) { clearInterval(timer); timer = null; } }
"""#
}
