extension ConsoleAssets {
    /// Requests to this node with the signed-in token; errors carry the server's `{"error"}` text.
    static let apiJS = #"""
export const session = {
  get token() { return sessionStorage.getItem('ember.token') || ''; },
  set token(t) { if (t) sessionStorage.setItem('ember.token', t); else sessionStorage.removeItem('ember.token'); },
  get ns() { return sessionStorage.getItem('ember.ns') || ''; },
  set ns(n) { if (n) sessionStorage.setItem('ember.ns', n); else sessionStorage.removeItem('ember.ns'); },
};

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// "/a/b" -> "/a/b.json" with each key percent-encoded (keys may hold any character but . $ # [ ] /).
export function dataURL(path, params = {}) {
  const keys = splitPath(path);
  const p = new URLSearchParams();
  if (session.ns) p.set('ns', session.ns);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
  const q = p.toString();
  return '/' + keys.map(encodeURIComponent).join('/') + '.json' + (q ? '?' + q : '');
}

export function splitPath(path) { return String(path).split('/').filter(k => k.length > 0); }
export function joinPath(path, key) { return '/' + [...splitPath(path), key].join('/'); }
export function parentPath(path) { const k = splitPath(path); k.pop(); return '/' + k.join('/'); }
export function lastKey(path) { const k = splitPath(path); return k.length ? k[k.length - 1] : null; }

function headers(extra = {}) {
  const h = { ...extra };
  if (session.token) h['Authorization'] = 'Bearer ' + session.token;
  return h;
}

// The body parsed as JSON (or the text itself when `raw`); a refusal throws the server's error.
async function answer(r, raw = false) {
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = text; }
  if (!r.ok) {
    const msg = body && typeof body === 'object' && body.error ? body.error : (typeof body === 'string' && body ? body : r.statusText);
    throw new ApiError(r.status, `${r.status}: ${msg}`);
  }
  return raw ? text : body;
}

export async function request(method, url, body, extraHeaders = {}, raw = false) {
  const init = { method, headers: headers(extraHeaders) };
  if (body !== undefined) { init.body = typeof body === 'string' ? body : JSON.stringify(body); init.headers['Content-Type'] = 'application/json'; }
  return answer(await fetch(url, init), raw);
}

// A document as its text, not parsed (the rules keep their comments and layout).
export const getText = (url) => request('GET', url, undefined, {}, true);

export const getData = (path, params) => request('GET', dataURL(path, params));
// Strings passed to request() go as they are (rules text); data is always sent as JSON.
export const setData = (path, value) => request('PUT', dataURL(path), JSON.stringify(value));
export const pushData = (path, value) => request('POST', dataURL(path), JSON.stringify(value));
export const deleteData = (path) => request('DELETE', dataURL(path));

export function withNs(url) {
  if (!session.ns) return url;
  return url + (url.includes('?') ? '&' : '?') + 'ns=' + encodeURIComponent(session.ns);
}

// XHR for transfers that report progress (large imports and exports).
export function transfer(method, url, body, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open(method, url);
    for (const [k, v] of Object.entries(headers(body !== undefined ? { 'Content-Type': 'application/json' } : {}))) x.setRequestHeader(k, v);
    const report = (e) => { if (e.lengthComputable) onProgress(Math.round(100 * e.loaded / e.total)); };
    x.upload.onprogress = report;
    x.onprogress = report;
    x.onload = () => {
      if (x.status >= 200 && x.status < 300) { resolve(x.responseText); return; }
      let msg = x.statusText;
      try { const b = JSON.parse(x.responseText); if (b && b.error) msg = b.error; } catch (e) {}
      reject(new ApiError(x.status, `${x.status}: ${msg}`));
    };
    x.onerror = () => reject(new ApiError(0, 'network error'));
    x.send(body);
  });
}

// Live changes through the node's own SSE stream (EventSource cannot send headers: auth= instead).
export function stream(path, onEvent, onState) {
  const params = {};
  if (session.token) params.auth = session.token;
  const es = new EventSource(dataURL(path, params));
  es.addEventListener('open', () => onState('on'));
  es.addEventListener('error', () => onState(es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting'));
  for (const kind of ['put', 'patch']) {
    es.addEventListener(kind, (e) => { try { onEvent(kind, JSON.parse(e.data)); } catch (err) { console.error(err); } });
  }
  es.addEventListener('cancel', () => { onState('cancelled (permission)'); es.close(); });
  es.addEventListener('auth_revoked', () => { onState('auth revoked'); es.close(); });
  return es;
}
"""#

    /// Tabs and sign-in; each tab's module draws itself when first shown.
    static let mainJS = #"""
import { session, request } from './api.js';
import * as data from './data.js';
import * as query from './query.js';
import * as rules from './rules.js';
import * as cluster from './cluster.js';
import * as triggers from './triggers.js';

const tabs = { data, query, rules, cluster, triggers };
let current = null;

// The location's hash names the tab, and for the data tab optionally a path: #data:/users/alice.
function fromHash() {
  const h = decodeURIComponent(location.hash.slice(1));
  const at = h.indexOf(':');
  return at < 0 ? [h, null] : [h.slice(0, at), h.slice(at + 1)];
}

function show(name, arg = null) {
  for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('active', b.dataset.tab === name);
  for (const s of document.querySelectorAll('section.tab')) s.hidden = s.id !== 'tab-' + name;
  if (current && current !== name && tabs[current].hide) tabs[current].hide();
  current = name;
  tabs[name].show(arg);
  if (arg === null) history.replaceState(null, '', '#' + name);
}

async function describeIdentity() {
  const el = document.getElementById('identity');
  if (!session.token) { el.textContent = 'anonymous'; return; }
  // The admin can read the rules; anyone else gets 401 there.
  try { await request('GET', '/.settings/rules.json' + (session.ns ? '?ns=' + encodeURIComponent(session.ns) : '')); el.textContent = 'signed in: admin'; }
  catch (e) { el.textContent = e.status === 401 ? 'signed in: token user' : 'signed in'; }
}

function restart() {
  for (const t of Object.values(tabs)) if (t.reset) t.reset();
  if (current) tabs[current].show();
  describeIdentity();
}

document.getElementById('ns').value = session.ns;
document.getElementById('token').value = session.token;
document.getElementById('signin').addEventListener('submit', (e) => {
  e.preventDefault();
  session.token = document.getElementById('token').value.trim();
  session.ns = document.getElementById('ns').value.trim();
  restart();
});
document.getElementById('signout-button').addEventListener('click', () => {
  session.token = '';
  document.getElementById('token').value = '';
  restart();
});
for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => show(b.dataset.tab));
window.addEventListener('hashchange', () => { const [t, arg] = fromHash(); if (tabs[t] && (t !== current || arg !== null)) show(t, arg); });
describeIdentity();
const [first, firstArg] = fromHash();
if (tabs[first]) show(first, firstArg); else show('data');
"""#
}
