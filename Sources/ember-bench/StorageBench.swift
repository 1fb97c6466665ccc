import ArgumentParser
import EmberCore
import EmberStorage
import Foundation
import Synchronization

/// The storage engine alone, in process: writes of the same small values as `write`, from K
/// concurrent submitters. No network, no HTTP/JSON front: the ceiling the engine sets on this
/// machine. Timed by default (durable: LMDB commit + fsync per group-commit batch); `--writes N`
/// writes N distinct keys instead, after which `--reads`/`--queries` measure the read paths.
struct StorageBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storage", abstract: "EmberStore alone: small writes from concurrent submitters, then optional reads and queries.")

    @Option(help: "Concurrent submitters (with --writes: writes in flight).")
    var submitters = 64

    @Option(help: "Writes each submitter keeps queued (1: `submit`, awaited one by one; more: `enqueue` bursts).")
    var pipeline = 1

    @Option(help: "Seconds per run (after a 1 s warm-up); ignored with --writes.")
    var duration = 10.0

    @Option(help: "Value size in bytes.")
    var valueSize = 16

    @Flag(help: "Timed runs: every write creates a new key, in increasing key order (as pushes do); default: each submitter rewrites 1,000 keys in turn.")
    var inserts = false

    @Option(help: "Group commit: most writes per LMDB transaction (StoreOptions.maxBatchEntries; default as emberd's).")
    var maxBatchEntries = StoreOptions().maxBatchEntries

    @Option(help: "Directory for the store (default: a fresh temporary one, removed afterwards).")
    var directory: String?

    @Option(help: "Write exactly N distinct keys /bench/w<i%64>/k<i> (instead of a timed run) and print their rate and CPU per write.")
    var writes: Int?

    @Option(help: "After --writes: N point reads of random written keys.")
    var reads = 0

    @Option(help: "After --writes: N `$key` limitToFirst 10 queries of the /bench/w<j> parents.")
    var queries = 0

    @Flag(help: "Put every key under one 768-byte and one 500-byte key (~1.3 KB tree keys: LMDB's key limit is overflowed).")
    var longPaths = false

    @Flag(help: "Not durable (MDB_NOSYNC): measures CPU, not fsync.")
    var noSync = false

    @Flag(help: "Load --children children {score, name} under /items (with .indexOn score unless --no-index) and print disk bytes per JSON byte, per table.")
    var footprint = false

    @Option(help: "With --footprint: how many children.")
    var children = 1_000_000

    @Flag(help: "With --footprint: no .indexOn.")
    var noIndex = false

    @Flag(help: "Store small objects per leaf, as before inline objects (StoreOptions.inlineObjects = false): the A/B of that format.")
    var perLeaf = false

    @Option(help: "Log entries kept after they are applied (default: as a single emberd, none; a cluster keeps 10000).")
    var logRetain: UInt64 = StoreOptions.singleNodeLogRetention

    @Option(help: "Triggers defined before the writes, each on /bench/{w}/{k} (every write creates one of their locations: one change record per write for their group), the apply's share of a trigger without delivery (nothing settles: the records stay).")
    var triggers = 0

    @Option(help: "Apply N entries (a set creating /bench/w<i%64>/<push-like key> each) through the replicated path a cluster member takes (`appendAndApply`, batches of --max-batch-entries, log retained as --log-retain says: 10000 here unless given), instead of submitting writes: the writer's CPU per entry, e.g. with and without --triggers.")
    var raftEntries: Int?

    @Option(help: "With --raft-entries: spread the writes over N top-level keys /p0 ... /p<N-1> (0: all below /bench), and with --triggers put each trigger on one of them (/p<i>/{w}/{k}: --triggers must equal N), as `ember-bench triggers`' spread case does: each write matches one trigger, the groups' records interleave in the table.")
    var spread = 0

    func validate() throws {
        guard (0...TriggerSet.maxTriggers).contains(triggers) else { throw ValidationError("--triggers must be 0...\(TriggerSet.maxTriggers)") }
        guard (0...TriggerSet.maxTriggers).contains(spread) else { throw ValidationError("--spread must be 0...\(TriggerSet.maxTriggers)") }
        if spread > 0 {
            guard raftEntries != nil else { throw ValidationError("--spread takes --raft-entries") }
            guard triggers == 0 || triggers == spread else { throw ValidationError("--spread N takes --triggers 0 or N (one trigger per key)") }
        }
        guard submitters >= 1, pipeline >= 1 else { throw ValidationError("--submitters and --pipeline must be at least 1") }
        guard reads >= 0, queries >= 0 else { throw ValidationError("--reads and --queries must not be negative") }
        if let writes {
            guard writes >= 1 else { throw ValidationError("--writes must be at least 1") }
            guard pipeline == 1 else { throw ValidationError("--writes submits each write awaited (--pipeline 1); --submitters sets how many are in flight") }
        } else if reads > 0 || queries > 0 {
            throw ValidationError("--reads and --queries read the keys a --writes run wrote")
        }
    }

    /// Keys live under this prefix; with --long-paths every tree key is longer than LMDB's limit.
    var prefix: [String] {
        longPaths ? [String(repeating: "L", count: 768), String(repeating: "m", count: 500)] : []
    }

    func run() async throws {
        let dir = directory ?? NSTemporaryDirectory() + "ember-storage-bench-\(UUID().uuidString)"
        defer { if directory == nil { try? FileManager.default.removeItem(atPath: dir) } }
        var options = StoreOptions()
        options.maxBatchEntries = maxBatchEntries
        options.durable = !noSync
        // A cluster member keeps 10,000 entries (what makes its trigger records compact).
        options.logRetention = raftEntries != nil && logRetain == StoreOptions.singleNodeLogRetention ? 10_000 : logRetain
        options.inlineObjects = !perLeaf
        let store = try EmberStore(directory: dir, options: options)
        defer { store.close() }
        // `--raft-entries` defines them through the replicated path itself (`raftRun`).
        if triggers > 0 && raftEntries == nil {
            _ = try await store.submit(namespace: "bench", .triggers(.define(text: triggerDocument)))
        }
        // Counted runs write each key once, so one value serves; timed runs rewrite keys (`benchValue`).
        let value = JSON.string(String(repeating: "x", count: valueSize))
        if let raftEntries {
            try await raftRun(store: store, entries: raftEntries)
        } else if footprint {
            try await FootprintRun(store: store, children: children, index: !noIndex).run()
        } else if let writes {
            try await CountedStorageRun(store: store, prefix: prefix, value: value, writes: writes, inFlight: submitters,
                                        reads: reads, queries: queries).run(describe: describe)
        } else {
            await timedRun(store: store)
        }
    }

    var describe: String {
        (writes == nil ? (inserts ? "a new key per write (increasing), " : "1,000 keys per submitter rewritten, ") : "")
            + "\(valueSize)-byte values, \(longPaths ? "long paths (~1.3 KB tree keys, overflow tables)" : "short paths"), "
            + (spread > 0 ? "writes spread over /p0 ... /p\(spread - 1), " : "")
            + (triggers > 0 ? (spread > 0 ? "\(triggers) triggers, one per key (each write matches one), " : "\(triggers) trigger(s) on every write, ") : "")
            + (noSync ? "not durable (MDB_NOSYNC)" : "durable (fsync per commit)") + ", at most \(maxBatchEntries) writes per commit"
    }

    /// The top-level key of write `k`: below /bench, or with `--spread` one of /p0 ... /p<N-1>.
    func top(_ k: Int) -> String { spread > 0 ? "p\(k % spread)" : "bench" }

    /// `--triggers`' document: each trigger on every write's location (with `--spread` trigger i
    /// on /p<i>'s), retention past any run.
    var triggerDocument: String {
        let defs = (0..<triggers).map { i in
            let pattern = "/" + (prefix + [top(i), "{w}", "{k}"]).joined(separator: "/")
            return #""t\#(i)": {"path": "\#(pattern)", "on": ["created"], "url": "http://127.0.0.1:9/h", "secret": "0123456789abcdef", "retainEntries": 10000000, "retainBytes": 4294967296}"#
        }
        return "{" + defs.joined(separator: ",") + "}"
    }

    /// `--raft-entries`: entries appended and applied as a follower's committed batches are.
    private func raftRun(store: EmberStore, entries n: Int) async throws {
        var next = store.lastLogIndex + 1
        func entry(_ op: WriteOperation) -> LogEntry {
            defer { next += 1 }
            return LogEntry(index: next, term: 1, namespace: "bench", operation: op, timestamp: 1_764_000_000_000 + Int64(next))
        }
        var defined: [TriggerDefinition] = []
        if triggers > 0 {
            let text = triggerDocument
            defined = try TriggerSet(text: text).definitions
            let d = entry(.triggers(.define(text: text)))
            _ = try await store.appendAndApply(entries: [d], through: d.index)
        }
        let value = JSON.string(String(repeating: "x", count: valueSize))
        let batch = max(1, maxBatchEntries)
        // Built before the clock starts: the writer's work alone is timed.
        var batches: [[LogEntry]] = []
        var i = 0
        while i < n {
            let m = min(batch, n - i)
            var b: [LogEntry] = []
            // Delivery keeping up a batch behind, as a leader's lanes do: each batch starts with
            // the cursors' entry through the batch before (their records then go, as on a member).
            if let through = batches.last?.last?.index, !defined.isEmpty {
                b.append(entry(.triggers(.advance(defined.map { TriggerCursor(name: $0.name, group: $0.group, through: through, rows: []) }))))
            }
            b += (i..<(i + m)).map { k in
                entry(.set(path: Path(validated: prefix + [top(k), "w\(k % 64)", benchKey(k, inserts: true)]), value: value, condition: nil))
            }
            batches.append(b)
            i += m
        }
        print("ember-bench storage --raft-entries: \(n) entries in batches of \(batch), \(describe), load average \(loadAverage())")
        let m0 = store.metrics
        let cpu0 = processCPUSeconds(getpid())
        let start = ContinuousClock.now
        for b in batches { _ = try await store.appendAndApply(entries: b, through: b.last!.index) }
        let seconds = (ContinuousClock.now - start).seconds
        let cpu = processCPUSeconds(getpid()) - cpu0
        let m1 = store.metrics
        let entries = Double(max(1, m1.entriesCommitted - m0.entriesCommitted))
        let txnCPU = Double(m1.transactionCPUNanos - m0.transactionCPUNanos), commitCPU = Double(m1.commitCPUNanos - m0.commitCPUNanos)
        print(String(format: "%.0f entries/s; process CPU %.2f µs per entry; writer CPU per entry %.2f µs applying + %.2f µs committing; load average %@",
                     Double(n) / seconds, cpu * 1e6 / Double(n), txnCPU / 1e3 / entries, commitCPU / 1e3 / entries, loadAverage()))
    }

    private func timedRun(store: EmberStore) async {
        print("ember-bench storage: \(submitters) submitters x \(pipeline) queued writes each, \(describe), "
              + "\(duration) s, load average \(loadAverage())")
        let prefix = prefix
        let start = ContinuousClock.now
        let measureFrom = start + .seconds(1)
        let end = measureFrom + .seconds(duration)
        let cpu0 = processCPUSeconds(getpid())
        let m0 = store.metrics
        let results: [(lat: [Double], ok: Int, errors: Int)]
        if pipeline == 1 {
            results = await withTaskGroup(of: (lat: [Double], ok: Int, errors: Int).self) { group in
                for w in 0..<submitters {
                    group.addTask {
                        var lat: [Double] = []
                        var ok = 0, errors = 0, i = 0
                        while ContinuousClock.now < end {
                            let t0 = ContinuousClock.now
                            let path = Path(validated: prefix + ["bench", "w\(w)", benchKey(i, inserts: inserts)])
                            do {
                                _ = try await store.submit(namespace: "bench", .set(path: path, value: .string(benchValue(i, size: valueSize)), condition: nil))
                                ok += 1
                            } catch { errors += 1 }
                            let t1 = ContinuousClock.now
                            if t0 >= measureFrom && t1 <= end { lat.append((t1 - t0).milliseconds) }
                            i += 1
                        }
                        return (lat, ok, errors)
                    }
                }
                var all: [(lat: [Double], ok: Int, errors: Int)] = []
                for await r in group { all.append(r) }
                return all
            }
        } else {
            let timing = PipelinedSubmitter.Timing(measureFrom: measureFrom, end: end)
            let subs = (0..<submitters).map {
                PipelinedSubmitter(store: store, worker: $0, depth: pipeline, prefix: prefix, valueSize: valueSize, inserts: inserts, timing: timing)
            }
            for s in subs { s.start() }
            results = await withTaskGroup(of: (lat: [Double], ok: Int, errors: Int).self) { group in
                for s in subs { group.addTask { await s.finished() } }
                var all: [(lat: [Double], ok: Int, errors: Int)] = []
                for await r in group { all.append(r) }
                return all
            }
        }
        let cpu = processCPUSeconds(getpid()) - cpu0
        let m1 = store.metrics
        var lat = results.flatMap(\.lat)
        lat.sort()
        func pct(_ p: Double) -> Double { lat.isEmpty ? 0 : lat[min(lat.count - 1, Int(Double(lat.count) * p))] }
        let ok = results.map(\.ok).reduce(0, +), errors = results.map(\.errors).reduce(0, +)
        let batches = m1.batches - m0.batches
        print(String(format: "storage: %d writes in %.1f s = %.0f writes/s, p50 %.2f ms, p99 %.2f ms, %d errors",
                     lat.count, duration, Double(lat.count) / duration, pct(0.5), pct(0.99), errors))
        print(String(format: "process CPU %.2f s = %.1f µs per write (%d incl. warm-up, submitters included); %llu commits, %.0f writes per commit; load average %@",
                     cpu, cpu * 1e6 / Double(max(1, ok)), ok, batches, Double(m1.entriesCommitted - m0.entriesCommitted) / Double(max(1, batches)),
                     loadAverage()))
        let txn = Double(m1.transactionNanos - m0.transactionNanos) / 1e6, commit = Double(m1.commitNanos - m0.commitNanos) / 1e6
        let commits = Double(max(1, m1.commits - m0.commits))
        let entries = Double(max(1, m1.entriesCommitted - m0.entriesCommitted))
        let txnCPU = Double(m1.transactionCPUNanos - m0.transactionCPUNanos), commitCPU = Double(m1.commitCPUNanos - m0.commitCPUNanos)
        print(String(format: "writer per commit: %.2f ms applying (%.2f ms CPU) + %.2f ms in mdb_txn_commit (%.2f ms CPU); "
                     + "writer CPU per write %.2f µs applying + %.2f µs committing",
                     txn / commits, txnCPU / 1e6 / commits, commit / commits, commitCPU / 1e6 / commits,
                     txnCPU / 1e3 / entries, commitCPU / 1e3 / entries))
    }
}

/// One submitter keeping `depth` writes queued through `EmberStore.enqueue`: each commit's
/// results come back in one call (on the writer thread), which queues as many new writes.
final class PipelinedSubmitter: CommitSink, @unchecked Sendable {
    struct Timing: Sendable {
        let measureFrom: ContinuousClock.Instant
        let end: ContinuousClock.Instant
    }
    struct State {
        var sent: [UInt64: ContinuousClock.Instant] = [:]
        var next: UInt64 = 0
        var lat: [Double] = []
        var ok = 0
        var errors = 0
        var waiter: CheckedContinuation<(lat: [Double], ok: Int, errors: Int), Never>?
        var done = false
    }
    let store: EmberStore
    let worker: Int
    let depth: Int
    let prefix: [String]
    let valueSize: Int
    let inserts: Bool
    let timing: Timing
    private let state = Mutex(State())

    init(store: EmberStore, worker: Int, depth: Int, prefix: [String], valueSize: Int, inserts: Bool, timing: Timing) {
        self.store = store
        self.worker = worker
        self.depth = depth
        self.prefix = prefix
        self.valueSize = valueSize
        self.inserts = inserts
        self.timing = timing
    }

    func start() { send(depth) }

    private func send(_ n: Int) {
        guard n > 0 else { return }
        let now = ContinuousClock.now
        let writes: [PipelinedWrite] = state.withLock { s in
            (0..<n).map { _ in
                let tag = s.next
                s.next += 1
                s.sent[tag] = now
                let path = Path(validated: prefix + ["bench", "w\(worker)", benchKey(Int(tag), inserts: inserts)])
                return PipelinedWrite(namespace: "bench", operation: .set(path: path, value: .string(benchValue(Int(tag), size: valueSize)), condition: nil), tag: tag)
            }
        }
        let refused = store.enqueue(writes, sink: self)
        if !refused.isEmpty { committed(refused.map { ($0.tag, .failure($0.error)) }) }
    }

    func committed(_ results: [(tag: UInt64, result: Result<WriteResult, any Error>)]) {
        let now = ContinuousClock.now
        let more: Int = state.withLock { s in
            for (tag, r) in results {
                let sent = s.sent.removeValue(forKey: tag) ?? now
                if case .success = r { s.ok += 1 } else { s.errors += 1 }
                if sent >= timing.measureFrom && now <= timing.end { s.lat.append((now - sent).milliseconds) }
            }
            if now < timing.end { return results.count }
            if s.sent.isEmpty, !s.done {
                s.done = true
                s.waiter?.resume(returning: (s.lat, s.ok, s.errors))
                s.waiter = nil
            }
            return 0
        }
        send(more)
    }

    func finished() async -> (lat: [Double], ok: Int, errors: Int) {
        await withCheckedContinuation { c in
            state.withLock { s in
                if s.done { c.resume(returning: (s.lat, s.ok, s.errors)) } else { s.waiter = c }
            }
        }
    }
}

extension Duration {
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}
