// Drives the official Firebase JS SDK (the bundle ../shared/jssdk builds) for the pytest tests:
// one JSON command per stdin line, one JSON answer per stdout line. Run as the body of an SDK
// script (`jssdk_helpers.Sdk`, through `spawn_sdk_script`: `sdk` and `stdinLine()` in scope).
//   in:  {"id": 1, "op": "open", "app": "a", "url": "http://127.0.0.1:PORT?ns=NS"}
//        {"id": 2, "op": "open", "app": "b", "ns": "NS", "emulator": {"host": "127.0.0.1", "port": P, "mockUserToken": {"sub": "alice"}}}
//        {"id": 3, "op": "set" | "get" | "update" | "listen" | "transaction" | "onDisconnectSet" | "exit", "app": ..., "path": ..., ...}
//   out: {"id": 1, "ok": true, "value": ...} | {"id": 1, "ok": false, "error": "..."}
//        {"event": "value", "sub": "s1", "value": ...}   (for each listen event)
const { initializeApp, getDatabase, connectDatabaseEmulator, ref, set, get, update, onValue,
        runTransaction, onDisconnect } = sdk;

const dbs = new Map();
const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');

function db(name) {
  const d = dbs.get(name);
  if (!d) throw new Error(`no app ${name}`);
  return d;
}

const ops = {
  async open(c) {
    let database;
    if (c.emulator) {
      // As an app under test with the emulator: a project URL, then connectDatabaseEmulator.
      const app = initializeApp({ databaseURL: `https://${c.ns}.firebaseio.com`, projectId: 'demo-project' }, c.app);
      database = getDatabase(app);
      const opts = c.emulator.mockUserToken ? { mockUserToken: c.emulator.mockUserToken } : {};
      connectDatabaseEmulator(database, c.emulator.host, c.emulator.port, opts);
    } else {
      database = getDatabase(initializeApp({ databaseURL: c.url }, c.app));
    }
    dbs.set(c.app, database);
    return null;
  },
  async set(c) { await set(ref(db(c.app), c.path), c.value); return null; },
  async update(c) { await update(ref(db(c.app), c.path), c.value); return null; },
  async get(c) { return (await get(ref(db(c.app), c.path))).val(); },
  async listen(c) {
    onValue(ref(db(c.app), c.path), (snap) => out({ event: 'value', sub: c.sub, value: snap.val() }),
            (err) => out({ event: 'cancel', sub: c.sub, error: String(err && (err.code || err.message)) }));
    return null;
  },
  // `count` increments of `path` at once, each a transaction (compare-and-set retried by the SDK).
  async transaction(c) {
    const r = ref(db(c.app), c.path);
    const results = await Promise.all(Array.from({ length: c.count }, () =>
      runTransaction(r, (v) => (v || 0) + 1)));
    return results.filter((x) => x.committed).length;
  },
  async onDisconnectSet(c) { await onDisconnect(ref(db(c.app), c.path)).set(c.value); return null; },
  async exit() { setImmediate(() => process.exit(0)); return null; },
};

// Commands run as they come (a listen or a transaction does not hold up the next command); the
// test closing stdin (or dying) ends the driver.
for (let line; (line = await stdinLine()) !== null;) {
  if (!line.trim()) continue;
  const c = JSON.parse(line);
  Promise.resolve().then(() => ops[c.op](c)).then(
    (value) => out({ id: c.id, ok: true, value: value === undefined ? null : value }),
    (e) => out({ id: c.id, ok: false, error: String((e && (e.code || e.message)) || e) }));
}
