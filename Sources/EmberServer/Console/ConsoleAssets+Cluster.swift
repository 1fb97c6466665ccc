extension ConsoleAssets {
    /// The cluster dashboard: every member's (voters' and learners') `/.ember/status` and this
    /// node's `/metrics`, polled; the corruption check's last verdict (voters' and learners'
    /// hashes) and a button to run it; leader transfer, promotion and removal behind a confirm.
    static let clusterJS = #"""
import { request } from './api.js';

const $ = (id) => document.getElementById(id);
const POLL_MS = 1000;
const HISTORY = 60;   // points per chart (one a second)
let timer = null;
const writes = [], latency = [];
let lastMetrics = null;

function cell(tr, text) { const td = document.createElement('td'); td.textContent = text; tr.append(td); return td; }

// A member that does not answer within statusTimeoutMs is shown unreachable: one stopped or hung
// member must not hold the whole panel (the poll waits for every member's status).
const statusTimeoutMs = 2000;
async function statusOf(url) {
  try {
    const r = await fetch(url.replace(/\/$/, '') + '/.ember/status', { signal: AbortSignal.timeout(statusTimeoutMs) });
    return r.ok ? await r.json() : null;
  } catch (e) { return null; }
}

async function poll() {
  let self;
  try { self = await request('GET', '/.ember/status'); } catch (err) { $('cluster-summary').textContent = err.message; return; }
  const urls = Object.assign({}, self.clientURLs || {});
  for (const [id, m] of Object.entries(self.members || {})) if (m && m.url) urls[id] = m.url;
  const ids = (self.voters && self.voters.length ? self.voters : Object.keys(urls)).slice().sort();
  // Learners (non-voting members) after the voters: they serve clients, in no quorum.
  const learners = (self.learners || []).filter((id) => !ids.includes(id)).sort();
  ids.push(...learners);
  if (!ids.includes(self.id)) ids.push(self.id);
  const statuses = {};
  await Promise.all(ids.map(async (id) => { statuses[id] = id === self.id ? self : (urls[id] ? await statusOf(urls[id]) : null); }));
  const leaderId = self.leader || Object.keys(statuses).find((id) => statuses[id] && statuses[id].role === 'leader');
  const leader = leaderId ? statuses[leaderId] : null;
  $('cluster-summary').textContent = self.role === 'single' || !self.voters
    ? `single node ${self.id || ''}: applied ${self.appliedIndex}`
    : `${ids.length - learners.length} voters` + (learners.length ? ` + ${learners.length} learner${learners.length > 1 ? 's' : ''}` : '')
      + `, leader ${leaderId || 'none'}, term ${self.term}; this node: ${self.id} (${self.role})`;
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
    const isLearner = learners.includes(id);
    if (id === leaderId) tr.classList.add('leader');
    if (isLearner) tr.classList.add('learner');
    cell(tr, id + (id === self.id ? ' (this node)' : ''));
    // A member that restarted behind serves no read until it caught up (docs/CLUSTER.md): say so,
    // with the reads it holds meanwhile.
    const role = cell(tr, s ? s.role + (s.caughtUp === false ? `, catching up (${s.catchUpHeld || 0} reads held)` : '')
      : (isLearner ? 'learner, unreachable' : 'unreachable'));
    if (s && s.caughtUp === false) role.className = 'catching-up';
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
      if (isLearner) {
        const p = document.createElement('button'); p.textContent = 'Promote'; p.className = 'promote';
        p.addEventListener('click', () => act(`Promote learner ${id} to voter? Every commit then waits for it too.`, 'POST', '/.ember/members/' + encodeURIComponent(id) + '/promote'));
        actions.append(p);
      } else if (id !== leaderId) {
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
  $('cluster-check').hidden = !self.voters;
  if (self.voters) showCheck(self.lastHashCheck || null, learners);
  await pollMetrics();
}

// The corruption check's verdict (POST /.ember/check/hashes, or `lastHashCheck` in the status):
// each voter's hash and each learner's, the learners marked as not counted toward the majority.
let lastLearners = [];
function showCheck(v, learners) {
  lastLearners = learners;
  const body = $('cluster-hashes').querySelector('tbody');
  if (!v) { $('cluster-check-summary').textContent = 'no state hash check yet on this node'; body.replaceChildren(); return; }
  const counts = {};
  for (const h of Object.values(v.hashes || {})) counts[h] = (counts[h] || 0) + 1;
  const majority = Object.keys(counts).find((h) => counts[h] > (v.voters || []).length / 2) || null;
  $('cluster-check-summary').textContent = `state hashes at applied index ${v.appliedIndex} (checked on ${v.node}): `
    + (v.corrupt ? 'CORRUPT' : v.conclusive ? 'a majority of the voters agree' : 'no conclusion')
    + (v.alarm ? `; ${v.alarm}` : '');
  $('cluster-check-summary').className = 'status' + (v.corrupt ? ' error' : '');
  body.replaceChildren();
  const learnerHashes = v.learnerHashes || {};
  const rows = (v.voters || []).map((id) => [id, false, (v.hashes || {})[id]])
    .concat([...new Set(Object.keys(learnerHashes).concat(learners))].sort().map((id) => [id, true, learnerHashes[id]]));
  for (const [id, learner, hash] of rows) {
    const tr = document.createElement('tr');
    tr.dataset.member = id;
    if (learner) tr.classList.add('learner');
    cell(tr, id);
    cell(tr, learner ? 'learner (not counted)' : 'voter');
    cell(tr, hash || '').className = 'mono hash';
    const agree = cell(tr, !hash ? 'no answer at this index' : !majority ? '' : hash === majority ? 'agrees' : 'DIFFERS');
    agree.className = 'agreement' + (hash && majority && hash !== majority ? ' alarm' : '');
    body.append(tr);
  }
}

async function runCheck() {
  $('cluster-check-summary').textContent = 'checking…';
  try { showCheck(await request('POST', '/.ember/check/hashes'), lastLearners); }
  catch (err) { $('cluster-check-summary').textContent = err.message; $('cluster-check-summary').className = 'status error'; }
}
$('cluster-check-run').addEventListener('click', runCheck);

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
