extension ConsoleAssets {
    /// The data viewer: a lazy tree (each level read shallowly when expanded, long child lists
    /// paged), live updates from the node's SSE stream, inline edits, import and export.
    static let dataJS = #"""
import { session, getData, setData, pushData, deleteData, dataURL, transfer, stream, joinPath, parentPath, lastKey, splitPath } from './api.js';

// Children drawn per page: a level with 1,000,000 children draws 100 rows, then more on demand.
const PAGE = 100;
// A shallow read answers `true` for every child, leaf or not: each drawn child's own shallow read
// of at most one key (this many at once) tells a leaf's value from a branch.
const RESOLVE_CONCURRENCY = 6;
const entries = new Map();   // path -> entry of every row on the page
let rootPath = '/';
let live = null;
let initialSeen = false;
let drawn = false;

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };

// Firebase key order: 32-bit integer keys numerically first, then strings by code unit.
const INT = /^(-?[1-9][0-9]{0,9}|0)$/;
function isIntKey(k) { if (!INT.test(k)) return false; const n = Number(k); return n >= -2147483648 && n <= 2147483647; }
export function keyCompare(a, b) {
  const ia = isIntKey(a), ib = isIntKey(b);
  if (ia && ib) return Number(a) - Number(b);
  if (ia) return -1;
  if (ib) return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

function status(text, isError = false) { const s = $('data-status'); s.textContent = text; s.classList.toggle('error', isError); }
function flash(node, cls) { node.classList.remove('flash-add', 'flash-remove'); void node.offsetWidth; node.classList.add(cls); }
const isObject = (v) => v !== null && typeof v === 'object';

function typeOf(v) { return v === null ? 'null' : typeof v; }
function parseTyped(text, type) {
  if (type === 'number') { const n = Number(text); if (text.trim() === '' || !Number.isFinite(n)) throw new Error('not a number: ' + text); return n; }
  if (type === 'boolean') { if (text !== 'true' && text !== 'false') throw new Error('a boolean is true or false'); return text === 'true'; }
  if (type === 'json') return JSON.parse(text);
  return text;
}

function typeSelect(initial) {
  const s = el('select', 'type');
  for (const t of ['string', 'number', 'boolean', 'json']) { const o = el('option', null, t); o.value = t; s.append(o); }
  s.value = initial;
  return s;
}

// One row (and its children container) for `path`. `value`: a primitive for a leaf, true for a
// node with children (shallow reads cannot tell an object from the leaf `true` until expanded).
function makeEntry(path, value) {
  const wrap = el('div', 'entry');
  wrap.dataset.path = path;
  const row = el('div', 'row');
  const toggle = el('span', 'toggle');
  const key = el('span', 'key', path === '/' ? '(root)' : lastKey(path));
  const val = el('span', 'value');
  const actions = el('span', 'actions');
  const add = el('button', 'add', '+'); add.title = 'Add child';
  const push = el('button', 'push', 'push'); push.title = 'Push child (generated key)';
  const del = el('button', 'delete', '×'); del.title = 'Delete';
  actions.append(add, push, del);
  row.append(toggle, key, el('span', 'colon', ':'), val, actions);
  const children = el('div', 'node');
  const more = el('div', 'more');
  wrap.append(row, children, more);
  const e = { path, wrap, row, toggle, val, children, more, expanded: false, keys: [], hasMore: false, leaf: false, value: undefined };
  entries.set(path, e);
  setValue(e, value);
  toggle.addEventListener('click', () => e.expanded ? collapse(e) : expand(e));
  val.addEventListener('click', () => { if (e.leaf) editValue(e); else if (!e.expanded) expand(e); });
  add.addEventListener('click', () => childForm(e, false));
  push.addEventListener('click', () => childForm(e, true));
  del.addEventListener('click', async () => {
    if (!confirm(`Delete ${path} and everything below it?`)) return;
    try { await deleteData(path); status(`deleted ${path}`); } catch (err) { status(err.message, true); }
  });
  return e;
}

function setValue(e, value) {
  const leaf = !isObject(value) && value !== true || (value === true && e.leaf);
  e.leaf = leaf;
  e.value = value;
  e.val.className = 'value ' + (leaf ? typeOf(value) : 'branch');
  e.val.textContent = leaf ? String(value) : (e.expanded ? '' : '{…}');
  e.toggle.textContent = leaf ? '' : (e.expanded ? '▾' : '▸');
}

// Forgets the drawn entries below `path` (and `path` itself when `inclusive`).
function dropBelow(path, inclusive) {
  const prefix = path === '/' ? '/' : path + '/';
  for (const p of [...entries.keys()]) if ((inclusive && p === path) || (p !== path && p.startsWith(prefix))) entries.delete(p);
}

function removeEntry(e) {
  dropBelow(e.path, true);
  e.wrap.remove();
}

async function expand(e) {
  let shallow;
  try { shallow = await getData(e.path, { shallow: 'true', limitToFirst: PAGE }); } catch (err) { status(`${e.path}: ${err.message}`, true); return false; }
  if (!isObject(shallow)) {
    // A leaf after all (e.g. the boolean true), or gone.
    if (shallow === null && e.path !== rootPath) { removeEntry(e); return; }
    e.leaf = true; setValue(e, shallow); return;
  }
  e.expanded = true;
  e.leaf = false;
  e.keys = [];
  e.children.replaceChildren();
  setValue(e, true);
  addPage(e, shallow);
}

function collapse(e) {
  e.expanded = false;
  dropBelow(e.path, false);
  e.children.replaceChildren();
  e.more.replaceChildren();
  e.keys = [];
  e.hasMore = false;
  setValue(e, true);
}

// One page of keys from the server (shallow, in key order): drawn, and their values resolved.
function addPage(e, page) {
  const keys = Object.keys(page).sort(keyCompare);
  e.hasMore = keys.length === PAGE;
  const frag = document.createDocumentFragment();
  const added = [];
  for (const k of keys) {
    const child = makeEntry(joinPath(e.path, k), true);
    added.push(child);
    frag.append(child.wrap);
    e.keys.push(k);
  }
  e.children.append(frag);
  drawMore(e);
  resolveValues(added);
}

// The next page: the keys after the last one drawn (Ember's shallow paging, one seek per key).
async function showMore(e) {
  const last = e.keys[e.keys.length - 1];
  try { addPage(e, await getData(e.path, { shallow: 'true', orderBy: '"$key"', startAfter: JSON.stringify(last), limitToFirst: PAGE })); }
  catch (err) { status(err.message, true); }
}

async function resolveValues(list) {
  let next = 0;
  const worker = async () => {
    while (next < list.length) {
      const c = list[next++];
      if (entries.get(c.path) !== c || c.expanded) continue;
      try {
        // One key is enough to tell a branch from a leaf: a child with 1,000,000 children
        // costs one seek, not a listing of all its keys.
        const v = await getData(c.path, { shallow: 'true', limitToFirst: 1 });
        if (entries.get(c.path) !== c || c.expanded) continue;
        if (v === null) continue;
        if (!isObject(v)) { c.leaf = true; setValue(c, v); }
      } catch (err) { /* the row stays a branch; expanding it shows the error */ }
    }
  };
  await Promise.all(Array.from({ length: RESOLVE_CONCURRENCY }, worker));
}

function drawMore(e) {
  e.more.replaceChildren();
  if (e.hasMore) {
    const b = el('button', 'show-more', `Show ${PAGE} more (${e.keys.length} shown)`);
    b.addEventListener('click', () => showMore(e));
    e.more.append(b);
  }
}

// A key appears under an expanded entry: drawn in order when inside the pages drawn so far
// (beyond them, the next page brings it).
function insertChild(parent, key, value) {
  const at = lowerBound(parent.keys, key);
  if (at === parent.keys.length && parent.hasMore) return;
  parent.keys.splice(at, 0, key);
  const child = makeEntry(joinPath(parent.path, key), value);
  parent.children.insertBefore(child.wrap, parent.children.children[at] || null);
  flash(child.row, 'flash-add');
  drawMore(parent);
}

function lowerBound(keys, key) {
  let lo = 0, hi = keys.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (keyCompare(keys[mid], key) < 0) lo = mid + 1; else hi = mid; }
  return lo;
}

function dropChild(parent, key) {
  const at = lowerBound(parent.keys, key);
  if (parent.keys[at] !== key) return;
  parent.keys.splice(at, 1);
  drawMore(parent);
  // Firebase has no empty objects: a parent left without children is gone too.
  if (parent.keys.length === 0 && !parent.hasMore && parent.path !== rootPath) applyPut(parent.path, null);
}

// One change from the stream, at an absolute path.
function applyPut(path, data) {
  const e = entries.get(path);
  if (e) {
    if (data === null) {
      if (path === rootPath) { collapse(e); setValue(e, null); e.leaf = true; flash(e.row, 'flash-remove'); return; }
      flash(e.row, 'flash-remove');
      const parent = entries.get(parentPath(path));
      setTimeout(() => { removeEntry(e); if (parent) dropChild(parent, lastKey(path)); }, 400);
      return;
    }
    if (isObject(data)) {
      if (e.expanded) {
        const now = Object.keys(data);
        const nowSet = new Set(now);
        for (const k of [...e.keys]) if (!nowSet.has(k)) { const c = entries.get(joinPath(path, k)); if (c) removeEntry(c); dropChild(e, k); }
        for (const k of now) applyPut(joinPath(path, k), data[k]);
      } else { e.leaf = false; setValue(e, true); }
    } else { e.leaf = true; setValue(e, data); }
    flash(e.row, 'flash-add');
    return;
  }
  if (data === null) return;
  // Not drawn: find the nearest drawn ancestor.
  let up = parentPath(path), below = lastKey(path);
  while (!entries.has(up)) {
    if (up === '/' || splitPath(up).length < splitPath(rootPath).length) return;
    below = lastKey(up);
    up = parentPath(up);
  }
  const a = entries.get(up);
  if (a.expanded) {
    if (a.keys.includes(below)) return;  // drawn later by paging
    insertChild(a, below, joinPath(up, below) === path ? data : true);
  } else {
    if (a.leaf) { a.leaf = false; setValue(a, true); }
    flash(a.row, 'flash-add');
  }
}

function onEvent(kind, msg) {
  const abs = msg.path === '/' ? rootPath : joinPath(rootPath, msg.path.replace(/^\//, ''));
  if (kind === 'put' && msg.path === '/') {
    // The stream's first event is the whole location, which the tree already shows from shallow reads.
    if (!initialSeen) { initialSeen = true; return; }
  }
  if (kind === 'put') applyPut(abs, msg.data);
  else for (const [k, v] of Object.entries(msg.data || {})) applyPut(joinPath(abs, k), v);
}

function editValue(e) {
  if (e.row.nextSibling && e.row.nextSibling.classList.contains('editrow')) return;
  const form = el('form', 'editrow');
  const input = el('input', 'edit-value');
  input.value = e.value === null ? '' : String(e.value);
  const type = typeSelect(typeof e.value === 'number' ? 'number' : typeof e.value === 'boolean' ? 'boolean' : 'string');
  const save = el('button', 'save', 'Save'); save.type = 'submit';
  const cancel = el('button', 'cancel', 'Cancel'); cancel.type = 'button';
  form.append(input, type, save, cancel);
  e.row.after(form);
  input.focus();
  cancel.addEventListener('click', () => form.remove());
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try { await setData(e.path, parseTyped(input.value, type.value)); form.remove(); status(`saved ${e.path}`); }
    catch (err) { status(err.message, true); }
  });
}

function childForm(e, isPush) {
  const form = el('form', 'editrow');
  const key = el('input', 'child-key'); key.placeholder = 'key';
  const value = el('input', 'child-value'); value.placeholder = 'value';
  const type = typeSelect('string');
  const save = el('button', 'save', isPush ? 'Push' : 'Add'); save.type = 'submit';
  const cancel = el('button', 'cancel', 'Cancel'); cancel.type = 'button';
  if (isPush) form.append(value, type, save, cancel); else form.append(key, value, type, save, cancel);
  e.row.after(form);
  (isPush ? value : key).focus();
  cancel.addEventListener('click', () => form.remove());
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const v = parseTyped(value.value, type.value);
      if (isPush) { const r = await pushData(e.path, v); status(`pushed ${joinPath(e.path, r.name)}`); }
      else { if (!key.value) throw new Error('a key is needed'); await setData(joinPath(e.path, key.value), v); status(`added ${joinPath(e.path, key.value)}`); }
      form.remove();
    } catch (err) { status(err.message, true); }
  });
}

async function exportJSON() {
  const bar = $('data-progress');
  bar.hidden = false; bar.value = 0;
  try {
    const text = await transfer('GET', dataURL(rootPath, { format: 'export' }), undefined, (p) => { bar.value = p; });
    const a = el('a');
    a.href = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    a.download = (rootPath === '/' ? 'root' : splitPath(rootPath).join('-')) + '.json';
    document.body.append(a); a.click(); a.remove();
    status(`exported ${rootPath} (${text.length} bytes)`);
  } catch (err) { status(err.message, true); }
  bar.hidden = true;
}

async function importJSON(file) {
  if (!file) return;
  const text = await file.text();
  try { JSON.parse(text); } catch (err) { status(`${file.name} is not JSON: ${err.message}`, true); return; }
  if (!confirm(`Replace the data at ${rootPath} with ${file.name} (${text.length} bytes)?`)) return;
  const bar = $('data-progress');
  bar.hidden = false; bar.value = 0;
  try { await transfer('PUT', dataURL(rootPath, { print: 'silent' }), text, (p) => { bar.value = p; }); status(`imported ${file.name} at ${rootPath}`); draw(); }
  catch (err) { status(err.message, true); }
  bar.hidden = true;
}

function goLive() {
  if (live) live.close();
  initialSeen = false;
  $('data-live').textContent = 'live: connecting';
  live = stream(rootPath, onEvent, (s) => { $('data-live').textContent = 'live: ' + s; });
}

async function draw() {
  drawn = true;
  // The old stream goes first: its location's initial data may be large.
  if (live) { live.close(); live = null; }
  entries.clear();
  const tree = $('tree');
  tree.replaceChildren();
  const started = performance.now();
  const root = makeEntry(rootPath, true);
  tree.append(root.wrap);
  const ok = await expand(root) !== false;
  tree.dataset.ready = 'true';
  if (ok) status(`${rootPath}: ${root.keys.length}${root.hasMore ? '+' : ''} children drawn in ${Math.round(performance.now() - started)} ms`);
  goLive();
}

let wired = false;
export function show(path = null) {
  if (path !== null) {
    rootPath = '/' + splitPath(path).join('/');
    $('data-root').value = rootPath;
    drawn = false;
  }
  if (!wired) {
    wired = true;
    $('data-go').addEventListener('click', () => { rootPath = '/' + splitPath($('data-root').value).join('/'); draw(); });
    $('data-root').addEventListener('keydown', (e) => { if (e.key === 'Enter') $('data-go').click(); });
    $('data-export').addEventListener('click', exportJSON);
    $('data-import').addEventListener('change', (e) => importJSON(e.target.files[0]));
  }
  if (!drawn) draw();
}
export function reset() { drawn = false; if (live) { live.close(); live = null; } $('tree').dataset.ready = ''; }
"""#
}
