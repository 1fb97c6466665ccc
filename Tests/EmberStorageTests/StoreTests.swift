import CLMDB
import EmberCore
import Foundation
import Testing
@testable import EmberStorage

@Suite struct StoreTests {
    @Test func applyAndRestart() async throws {
        let dir = tempDir()
        do {
            let s = try openStore(dir)
            let r = try await s.set("/a/b", #"{"x": 1, "y": 2.5, "z": "s", "w": true}"#)
            #expect(r.index == 1 && r.isApplied)
            try await s.set("/c", "3", ns: "other")
            #expect(s.appliedIndex == 2)
            s.close()
        }
        let t0 = Date()
        let s = try openStore(dir)
        print("reopen (small tree) took \(Date().timeIntervalSince(t0) * 1000) ms")
        #expect(s.appliedIndex == 2 && s.lastLogIndex == 2)
        let b = try s.get("/a/b")
        #expect(b == n(#"{"x": 1, "y": 2.5, "z": "s", "w": true}"#))
        if case .int(1)? = b.child("x").leaf {} else { Issue.record("int kind lost") }
        if case .double(2.5)? = b.child("y").leaf {} else { Issue.record("double kind lost") }
        #expect(try s.get("/c", ns: "other") == n("3"))
        #expect(try s.get("/c").isEmpty)
        let r = try await s.set("/d", "1")
        #expect(r.index == 3)
        #expect(try s.shallowKeys(namespace: "t", path: .root) == ["a", "d"])
    }

    @Test func versions() async throws {
        let s = try openStore()
        try await s.set("/a/b", "1")            // 1
        try await s.set("/a/c", "2")            // 2
        try await s.set("/x", "9")              // 3
        #expect(try s.ver("/a/b") == 1)
        #expect(try s.ver("/a/c") == 2)
        #expect(try s.ver("/a") == 2)           // descendant write bumps the ancestor
        #expect(try s.ver("/") == 3)
        #expect(try s.ver("/x") == 3)
        #expect(try s.ver("/a/b") == 1)         // sibling write does not bump
        try await s.set("/a", #"{"b": 5, "c": 2}"#)  // 4: ancestor write bumps descendants
        #expect(try s.ver("/a/c") == 4 && s.ver("/a/b") == 4 && s.ver("/a/b/deep") == 4)
        #expect(try s.ver("/x") == 3)
        let same = try await s.set("/a", #"{"b": 5, "c": 2}"#)  // 5: no-op, no bump
        #expect(same.outcome == .applied(changed: false) && same.changeSet.changes.isEmpty)
        #expect(try s.ver("/a") == 4 && s.ver("/") == 4)
        #expect(try s.dataVersion(namespace: "t", path: p("/a")) == 4)
        #expect(try s.dataVersion(namespace: "t", path: p("/nope")) == nil)
    }

    @Test func conditionalWrites() async throws {
        let s = try openStore()
        try await s.set("/a", #"{"v": 1}"#)                                  // 1
        let bad = try await s.set("/a", "2", .ifVersion(7))                    // 2
        #expect(bad.outcome == .conditionFailed(current: n(#"{"v": 1}"#), version: 1))
        #expect(bad.index == 2)
        #expect(try s.get("/a") == n(#"{"v": 1}"#) && s.ver("/a") == 1)
        let ok = try await s.set("/a", "2", .ifVersion(1))
        #expect(ok.isApplied && ok.version == 3)
        let h = n("2").firebaseHash
        #expect(try await s.set("/a", "3", .ifHash("nope")).isApplied == false)
        #expect(try await s.set("/a", "3", .ifHash(h)).isApplied)
        #expect(try await s.set("/new", "1", .ifHash("x")).isApplied == false)
        #expect(try await s.set("/new", "1", .ifHash("")).isApplied)
        #expect(try await s.set("/e", "1", .ifDataVersion(0)).isApplied == false)
        let e1 = try await s.set("/e", "1", .ifDataVersion(nil))
        #expect(e1.isApplied)
        #expect(try await s.set("/e", "2", .ifDataVersion(nil)).isApplied == false)
        #expect(try await s.set("/e", "2", .ifDataVersion(s.dataVersion(namespace: "t", path: p("/e")))).isApplied)
        let u = try await s.update("/", [("e", "5"), ("f", "6")], .ifVersion(1))
        #expect(!u.isApplied)
        #expect(try s.get("/e") == n("2") && s.get("/f").isEmpty)
    }

    @Test func multiPathUpdateAtomicity() async throws {
        let s = try openStore()
        try await s.set("/", #"{"a": 0, "b": 0}"#)
        // Invalid part: nothing at all is written, nothing enters the log.
        await #expect(throws: StorageError.self) { try await s.update("/", [("a", "1"), ("b", #"{"bad.key": 1}"#)]) }
        await #expect(throws: StorageError.self) { try await s.update("/", [("a", "1"), ("a/x", "1")]) }
        #expect(try s.get("/") == n(#"{"a": 0, "b": 0}"#) && s.lastLogIndex == 1)
        // Readers never see half an update.
        let writer = Task {
            for i in 1...100 { try await s.update("/", [("a", "\(i)"), ("b", "\(i)"), ("c/d", "null")]) }
        }
        var reads = 0
        while !writer.isCancelled {
            await Task.yield()
            let root = try s.get("/")
            #expect(root.child("a") == root.child("b"))
            reads += 1
            if root.child("a") == n("100") { break }
        }
        try await writer.value
        #expect(reads > 0)
        let r = try await s.update("/x", [("p/q", "1"), ("r", #"{"s": 2}"#)])
        #expect(r.changeSet.changes.map(\.path) == [p("/x/p/q"), p("/x/r")])
        #expect(r.changeSet.changes.map(\.node) == [n("1"), n(#"{"s":2}"#)])
        #expect(r.value == n(#"{"p": {"q": 1}, "r": {"s": 2}}"#))
    }

    @Test func prioritiesAndLeafToObject() async throws {
        let s = try openStore()
        try await s.set("/a", #"{".value": "leaf", ".priority": 5}"#)
        #expect(try s.get("/a") == Node(.string("leaf"), priority: .number(5)))
        try await s.set("/a/b", "1")  // leaf becomes an object that keeps its priority
        #expect(try s.get("/a") == Node(children: ["b": n("1")], priority: .number(5)))
        try await s.set("/o", #"{".priority": "p", "x": {".priority": 1, "y": 2}}"#)
        #expect(try s.get("/o") == n(#"{".priority": "p", "x": {".priority": 1, "y": 2}}"#))
        #expect(try s.get("/o/x").priority == .number(1))
        // Deleting under a leaf changes nothing.
        try await s.set("/l", "7")
        let noop = try await s.set("/l/z", "null")
        #expect(noop.outcome == .applied(changed: false))
        #expect(try s.get("/l") == n("7"))
    }

    @Test func pruningEmptyParents() async throws {
        let s = try openStore()
        try await s.set("/a", #"{".priority": 9, "b": {"c": 1, ".priority": 2}}"#)
        try await s.set("/k", "1")
        try await s.set("/a/b/c", "null")
        #expect(try s.get("/a").isEmpty)
        #expect(try s.shallowKeys(namespace: "t", path: .root) == ["k"])
        #expect(try s.get("/") == n(#"{"k": 1}"#))
        try await s.set("/e", #"{"x": {}, "y": []}"#)
        #expect(try s.get("/e").isEmpty && s.exists(namespace: "t", path: p("/e")) == false)
        try await s.set("/k", "null")
        #expect(try s.get("/").isEmpty)
        // A deleted root keeps no priority record behind.
        try await s.set("/", #"{".priority": 1, "z": 1}"#)
        try await s.update("/", [("z", "null")])
        #expect(try s.get("/") == .empty)
    }

    @Test func serverValues() async throws {
        let s = try openStore()
        let r = try await s.set("/t", #"{".sv": "timestamp"}"#)
        let entry = try #require(try s.entries(from: r.index, maxCount: 1).first)
        #expect(try s.get("/t") == Node(.int(entry.timestamp)))
        try await s.set("/c", "\(Int64.max - 1)")
        try await s.set("/c", #"{".sv": {"increment": 1}}"#)
        #expect(try s.get("/c").leaf == .int(Int64.max))
        try await s.set("/c", #"{".sv": {"increment": 1}}"#)
        guard case .double(let d)? = try s.get("/c").leaf else { Issue.record("not a double"); return }
        #expect(d == Double(Int64.max) + 1)
        try await s.update("/", [("n", #"{".sv": {"increment": 2}}"#), ("m", #"{".sv": {"increment": 2.5}}"#)])
        #expect(try s.get("/n").leaf == .int(2) && s.get("/m").leaf == .double(2.5))
        await #expect(throws: StorageError.self) { try await s.set("/q", #"{".sv": "bogus"}"#) }
        // Replay on another replica resolves the same timestamp from the entry.
        let other = try openStore()
        try await other.apply(entries: try s.entries(from: 1))
        #expect(try other.stateHash(namespace: "t") == s.stateHash(namespace: "t"))
        #expect(try other.get("/t") == Node(.int(entry.timestamp)))
    }

    @Test func compactionKeepsTail() async throws {
        var o = smallOptions()
        o.logRetention = 10
        o.compactionMinimum = 1
        let s = try openStore(tempDir(), o)
        for i in 0..<40 { try await s.set("/k", "\(i)") }
        #expect(s.lastLogIndex == 40)
        #expect(s.firstLogIndex == 31)
        #expect(try s.entries(from: 1).map(\.index) == Array(31...40))
        #expect(try s.term(at: 5) == nil && s.term(at: 35) == 0)
        #expect(s.metrics.compactedEntries == 30)
    }

    /// Old entries go in batches of at least `compactionMinimum`: at 18, 26 and 34 entries
    /// (8 due each time), not at 40 (6 due); the log never holds more than retention + minimum.
    @Test func compactionWaitsForAWholeBatch() async throws {
        var o = smallOptions()
        o.logRetention = 10
        o.compactionMinimum = 8
        let s = try openStore(tempDir(), o)
        var longest: UInt64 = 0
        for i in 0..<40 {
            try await s.set("/k", "\(i)")
            longest = max(longest, s.lastLogIndex - s.firstLogIndex + 1)
            if i == 16 { #expect(s.firstLogIndex == 1) }
            if i == 17 { #expect(s.firstLogIndex == 9) }
        }
        #expect(s.firstLogIndex == 25 && s.lastLogIndex == 40)
        #expect(try s.entries(from: 1).map(\.index) == Array(25...40))
        #expect(s.metrics.compactedEntries == 24)
        #expect(longest <= 10 + 8)
    }

    /// A single node (retention 0) keeps no applied entries, and restarts from its applied state
    /// to the same data, versions and log position (new writes continue the index: ETags stay
    /// unique). A directory that kept a tail under a larger retention drops it on its next commit.
    @Test func singleNodeKeepsNoAppliedEntriesAndRestarts() async throws {
        let dir = tempDir()
        var keep = smallOptions()
        keep.logRetention = 100
        do {
            let s = try openStore(dir, keep)
            for i in 0..<30 { try await s.set("/old/k\(i % 7)", "\(i)") }
            #expect(try s.entries(from: 1).count == 30)
            s.close()
        }
        var o = smallOptions()
        o.logRetention = StoreOptions.singleNodeLogRetention
        var hash = ""
        do {
            let s = try openStore(dir, o)
            #expect(s.firstLogIndex == 1 && s.lastLogIndex == 30)
            try await withThrowingTaskGroup(of: Void.self) { g in
                for i in 0..<200 { g.addTask { try await s.set("/w/k\(i % 40)", #"{"v": \#(i)}"#) } }
                try await g.waitForAll()
            }
            try await s.update("/w", [("k1/v", "-1"), ("k2", "null")])
            #expect(s.lastLogIndex == 231 && s.appliedIndex == 231 && s.firstLogIndex == 232)
            #expect(try s.entries(from: 1).isEmpty)
            #expect(try s.footprint().tables.first { $0.name == "log" }?.entries == 0)
            #expect(try s.ver("/w/k1") == 231 && s.ver("/old") == 30 && s.ver("/old/k2") == 24)
            hash = try s.stateHash()
            s.close()
        }
        let s = try openStore(dir, o)
        #expect(s.appliedIndex == 231 && s.lastLogIndex == 231 && s.firstLogIndex == 232)
        #expect(try s.stateHash() == hash)
        #expect(try s.get("/w/k1") == n(#"{"v": -1}"#) && s.get("/w/k2").isEmpty && s.ver("/w/k1") == 231)
        let r = try await s.set("/w/k1/v", "5")
        #expect(r.index == 232 && r.version == 232 && s.firstLogIndex == 233)
        #expect(try s.entries(from: 1).isEmpty)
    }

    @Test func groupCommit() async throws {
        let s = try openStore()
        let before = s.metrics
        let writes = 2_000
        let t0 = Date()
        try await withThrowingTaskGroup(of: Void.self) { g in
            for i in 0..<writes {
                g.addTask { try await s.set("/w/\(i % 500)", "\(i)") }
            }
            try await g.waitForAll()
        }
        let dt = Date().timeIntervalSince(t0)
        let m = s.metrics
        let commits = m.commits - before.commits
        print("group commit: \(writes) durable writes in \(Int(dt * 1000)) ms = \(Int(Double(writes) / dt)) writes/s, \(commits) commits, max batch \(m.maxBatchEntries)")
        // For comparison: one writer awaiting each write (one commit + fsync per write).
        let t1 = Date()
        for i in 0..<100 { try await s.set("/seq/\(i)", "\(i)") }
        let seq = Date().timeIntervalSince(t1)
        print("sequential: 100 durable writes in \(Int(seq * 1000)) ms = \(Int(100 / seq)) writes/s (one commit each)")
        #expect(m.entriesCommitted - before.entriesCommitted == UInt64(writes))
        #expect(commits < UInt64(writes) / 2)
        #expect(s.lastLogIndex == UInt64(writes + 100))
        #expect(try s.childCount(namespace: "t", path: p("/w")) == 500)
    }

    @Test func queueLimit() async throws {
        var o = smallOptions()
        o.maxPendingWrites = 1
        let s = try openStore(tempDir(), o)
        var full = 0
        try await withThrowingTaskGroup(of: Bool.self) { g in
            for i in 0..<300 {
                g.addTask {
                    do { try await s.set("/q/\(i)", "1"); return false } catch StorageError.queueFull { return true }
                }
            }
            for try await f in g where f { full += 1 }
        }
        #expect(s.metrics.queueRejections == UInt64(full))
        #expect(s.lastLogIndex == UInt64(300 - full))
    }

    @Test func commitSubscriptionInOrder() async throws {
        let s = try openStore()
        let stream = s.commits()
        for i in 0..<20 { try await s.set("/s/\(i)", "\(i)") }
        var seen: [UInt64] = []
        for await r in stream {
            seen.append(r.index)
            #expect(r.changeSet.namespace == "t" && r.changeSet.changes.first?.path == p("/s/\(r.index - 1)"))
            if seen.count == 20 { break }
        }
        #expect(seen == Array(1...20))
    }

    @Test func inputLimits() async throws {
        let s = try openStore()
        await #expect(throws: StorageError.self) { try await s.set("/a", "1", ns: "bad ns") }
        await #expect(throws: StorageError.self) { try await s.set("/a", "1", ns: "") }
        // Firebase's key limit (768 bytes) in the data; paths are checked when parsed (`Path`).
        let long = String(repeating: "k", count: 769)
        await #expect(throws: StorageError.invalid(.keyTooLong(bytes: 769))) { try await s.set("/a", #"{"\#(long)": {"b": 1}}"#) }
        #expect(s.lastLogIndex == 0)
    }

    @Test func snapshotRoundTrip() async throws {
        let a = try openStore()
        try await a.setIndexes(namespace: "t", [try IndexSpec(location: "/u", indexes: ["h"])])
        for i in 0..<50 { try await a.set("/u/\(i)", #"{"h": \#(i % 7)}"#) }
        try await a.set("/x", "1", ns: "n2")
        var chunks: [[UInt8]] = []
        try a.snapshot(maxChunkBytes: 512) { chunks.append($0) }
        #expect(chunks.count > 1)
        let b = try openStore()
        try await b.installSnapshot(chunks: chunks)
        #expect(b.appliedIndex == a.appliedIndex && b.lastLogIndex == a.appliedIndex)
        #expect(try b.stateHash() == a.stateHash())
        #expect(try b.stateHash(namespace: "n2") == a.stateHash(namespace: "n2"))
        #expect(try b.stateHash(namespace: "t") != a.stateHash(namespace: "n2"))
        let q = QuerySpec(index: .child(p("h"))).equal(to: .number(3))
        #expect(try b.query(namespace: "t", path: p("/u"), spec: q).map(\.key) == a.query(namespace: "t", path: p("/u"), spec: q).map(\.key))
        let r = try await b.set("/x", "2", ns: "n2")
        #expect(r.index == a.appliedIndex + 1)
    }

    @Test func raftPrimitives() async throws {
        let leader = try openStore()
        try await leader.setHardState(HardState(term: 3, votedFor: "n1"))
        for i in 0..<10 { try await leader.set("/r/\(i)", "\(i)") }
        #expect(try leader.entries(from: 1).allSatisfy { $0.term == 3 })
        let f = try openStore()
        let es = try leader.entries(from: 1)
        try await f.append(entries: Array(es[0..<6]))
        #expect(f.lastLogIndex == 6 && f.appliedIndex == 0)
        let applied = try await f.applyCommitted(through: 4)
        #expect(applied.map(\.index) == [1, 2, 3, 4] && f.appliedIndex == 4)
        // Conflicting suffix replaced; applied entries cannot be.
        await #expect(throws: StorageError.self) { try await f.append(entries: [es[2]]) }
        try await f.append(entries: Array(es[4...]))
        try await f.applyCommitted(through: 100)
        #expect(f.appliedIndex == 10 && f.lastLogTerm == 3)
        #expect(try f.stateHash() == leader.stateHash())
        try await f.append(entries: [LogEntry(index: 11, term: 4, namespace: "t", operation: .noop, timestamp: 0)])
        await #expect(throws: StorageError.self) { try await f.set("/r/x", "1") }  // unapplied entries: no submit
        try await f.applyCommitted(through: 11)
        #expect(try await f.set("/r/x", "1").index == 12)
        #expect(try await f.hardState() == HardState(term: 0, votedFor: nil))
        #expect(try await leader.hardState() == HardState(term: 3, votedFor: "n1"))
    }

    /// A Raft host checks a write once, where it is proposed, and appends unchecked
    /// (`validated: true`); unchecked, `append` refuses a bad write and logs nothing. A bad
    /// entry that is logged anyway is rejected when applied, the same way on every replica.
    @Test func appendChecksEntriesUnlessTheCallerDid() async throws {
        func entry(_ index: UInt64, _ value: String) -> LogEntry {
            LogEntry(index: index, term: 1, namespace: "t", operation: .set(path: p("/k"), value: j(value), condition: nil), timestamp: 0)
        }
        let bad = #"{"a.b": 1}"#  // "." is not allowed in a key
        let a = try openStore(), b = try openStore()
        await #expect(throws: StorageError.self) { try await a.append(entries: [entry(1, bad)]) }
        #expect(a.lastLogIndex == 0)
        for s in [a, b] {
            try await s.append(entries: [entry(1, "1"), entry(2, bad)], validated: true)
            let results = try await s.appendAndApply(entries: [entry(3, "3")], through: 3, validated: true)
            #expect(results.map(\.index) == [1, 2, 3])
            guard case .rejected = results[1].outcome else { Issue.record("entry 2: \(results[1].outcome)"); continue }
            #expect(try s.get("/k").leaf == .int(3))
        }
        #expect(try a.stateHash() == b.stateHash())
        // With its encoding given, an unchecked entry is judged by those bytes (not encoded
        // again): over the size limit is refused, a bad key still is.
        var options = smallOptions()
        options.maxEntryBytes = 200
        let c = try openStore(tempDir(), options)
        let fine = entry(1, "1")
        await #expect(throws: StorageError.self) {
            try await c.append(entries: [fine], encoded: [Array(repeating: 0, count: 201)])
        }
        await #expect(throws: StorageError.self) {
            try await c.append(entries: [entry(1, bad)], encoded: [entry(1, bad).encoded()])
        }
        #expect(c.lastLogIndex == 0)
        try await c.append(entries: [fine], encoded: [fine.encoded()])
        #expect(c.lastLogIndex == 1)
    }

    /// The leader's check of a forwarded entry (`validate(entry:encodedBytes:)`, no second
    /// encoding) refuses exactly what the full check refuses, and judges size by the bytes given.
    @Test func anEncodedEntryIsCheckedLikeTheWriteItCameFrom() throws {
        var options = smallOptions()
        options.maxUpdateParts = 2
        let s = try openStore(tempDir(), options)
        let operations: [(String, WriteOperation)] = [
            ("t", .set(path: p("/k"), value: j(#"{"a": 1, "b": {".sv": "timestamp"}}"#), condition: nil)),
            ("t", .set(path: p("/k"), value: j(#"{"a.b": 1}"#), condition: nil)),
            ("t", .update(path: p("/u"), values: [(p("/a"), j("1")), (p("/b"), j("2"))], condition: nil)),
            ("t", .update(path: p("/u"), values: [(p("/a"), j("1")), (p("/b"), j("2")), (p("/c"), j("3"))], condition: nil)),
            ("t", .update(path: p("/u"), values: [(p("/a"), j("1")), (p("/a/b"), j("2"))], condition: nil)),
            ("t", .setRules(text: #"{"rules": {".read": true}}"#)),
            ("t", .setRules(text: #"{"rules": {".read": "auth."}}"#)),
            ("bad/ns", .set(path: p("/k"), value: j("1"), condition: nil)),
            ("t", .onDisconnect(.register(session: OnDisconnectSession(node: "n1", incarnation: "i1", id: "c-1"), write: .set(path: p("/k"), value: j(#"{"$x": 1}"#), condition: nil)))),
        ]
        var refused = 0
        for (ns, op) in operations {
            let entry = LogEntry(index: 0, term: 0, namespace: ns, operation: op, timestamp: 0)
            let full = Result { try s.validate(namespace: ns, operation: op) }
            let fromBytes = Result { try s.validate(entry: entry, encodedBytes: entry.encoded().count) }
            switch (full, fromBytes) {
            case (.success, .success): break
            case (.failure(let a), .failure(let b)): refused += 1; #expect("\(a)" == "\(b)")
            default: Issue.record("\(op): full check \(full), encoded check \(fromBytes)")
            }
        }
        #expect(refused == 6)
        let entry = LogEntry(index: 0, term: 0, namespace: "t", operation: operations[0].1, timestamp: 0)
        #expect(throws: StorageError.entryTooLarge(bytes: options.maxEntryBytes + 1, limit: options.maxEntryBytes)) {
            try s.validate(entry: entry, encodedBytes: options.maxEntryBytes + 1)
        }
    }

    /// An apply without the meta page's sync (`metaSync: false`, an idle Raft host's apply-only
    /// commit) applies the same as a synced one, leaves the environment's flags as they were
    /// (the next commit is fully synced), and its state is there after a reopen.
    @Test func anApplyWithoutMetaSyncAppliesTheSameAndRestoresTheFlags() async throws {
        func entries() -> [LogEntry] {
            (1...6).map { LogEntry(index: UInt64($0), term: 1, namespace: "t", operation: .set(path: p("/k\($0 % 3)"), value: j("\($0)"), condition: nil), timestamp: 0) }
        }
        func flags(_ s: EmberStore) -> UInt32 {
            var f: UInt32 = 0
            _ = mdb_env_get_flags(s.env, &f)
            return f
        }
        let dirA = tempDir()
        var hash = ""
        do {
            let a = try openStore(dirA), b = try openStore()
            let before = flags(a)
            #expect(before & UInt32(MDB_NOMETASYNC) == 0)
            for s in [a, b] { try await s.append(entries: entries()) }
            let unsynced = try await a.applyCommitted(through: 4, metaSync: false)
            let synced = try await b.applyCommitted(through: 4)
            #expect(unsynced.map(\.index) == synced.map(\.index) && a.appliedIndex == 4)
            #expect(flags(a) == before)
            try await a.applyCommitted(through: 6, metaSync: false)
            try await b.applyCommitted(through: 6)
            #expect(try a.stateHash() == b.stateHash())
            hash = try a.stateHash()
            a.close()
        }
        let reopened = try openStore(dirA)
        #expect(try reopened.appliedIndex == 6 && reopened.stateHash() == hash)
    }

    @Test func concurrentReadersDuringWrites() async throws {
        let s = try openStore()
        try await s.set("/", #"{"n": 0}"#)
        try await withThrowingTaskGroup(of: Void.self) { g in
            g.addTask { for i in 1...200 { try await s.update("/", [("n", "\(i)"), ("m/\(i % 10)", "\(i)")]) } }
            for _ in 0..<3 {
                g.addTask {
                    var last: Int64 = 0
                    while last < 200 {
                        await Task.yield()
                        let (node, version) = try s.read(namespace: "t", path: .root)
                        guard case .int(let v)? = node.child("n").leaf else { Issue.record("missing"); return }
                        #expect(v >= last)
                        #expect(version >= UInt64(v))
                        last = v
                    }
                }
            }
            try await g.waitForAll()
        }
    }

    @Test func reopenLargeTreeIsFast() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var o = smallOptions()
        o.durable = false
        do {
            let s = try openStore(dir, o)
            for c in 0..<5 {
                var obj: KeyMap<JSON> = [:]
                for i in (c * 10_000)..<((c + 1) * 10_000) {
                    var inner: KeyMap<JSON> = obj[String(i / 100)]?.objectValue ?? [:]
                    if inner[String(i % 100)] == nil { inner[String(i % 100)] = .int(Int64(i)) }
                    obj[String(i / 100)] = .object(inner)
                }
                _ = try await s.submit(namespace: "t", .update(path: p("/big"), values: obj.map { (p($0.key), $0.value) }))
            }
            s.close()
        }
        let t0 = Date()
        let s = try openStore(dir, o)
        let openMs = Date().timeIntervalSince(t0) * 1000
        let t1 = Date()
        let node = try s.get("/big/250")
        let readMs = Date().timeIntervalSince(t1) * 1000
        print("reopen with 50,000 leaves: \(String(format: "%.2f", openMs)) ms; read of 100 leaves \(String(format: "%.2f", readMs)) ms")
        #expect(node.childCount == 100)
        #expect(openMs < 1000)
        #expect(s.appliedIndex == 5)
    }
}

@Suite struct SubscriptionTests {
    @Test func slowSubscriberIsFinished() async throws {
        var o = smallOptions()
        o.subscriptionBuffer = 3
        let s = try openStore(tempDir(), o)
        let stream = s.commits()
        for i in 0..<6 { try await s.set("/x", "\(i)") }
        var got: [UInt64] = []
        for await r in stream { got.append(r.index) }  // ends: the stream was finished on overflow
        #expect(got == [1, 2, 3])
    }

    @Test func updateVersionsPerPart() async throws {
        let s = try openStore()
        try await s.set("/a", #"{"b": 1, "c": 1, "d": 1}"#)                 // 1
        try await s.update("/a", [("b", "2"), ("c", "1")])                   // 2: c unchanged
        #expect(try s.ver("/a/b") == 2 && s.ver("/a/c") == 1 && s.ver("/a") == 2 && s.ver("/a/d") == 1)
        let r = try await s.update("/a", [("c", "1")])                       // 3: nothing changes
        #expect(try r.outcome == .applied(changed: false) && s.ver("/a") == 2)
        #expect(s.lastLogIndex == 3)
    }
}
