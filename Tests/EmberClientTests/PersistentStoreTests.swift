import EmberCore
import EmberSyncTree
import Foundation
import Logging
import Synchronization
import Testing
import EmberTestSupport
@testable import EmberClient

/// The disk cache itself, on real SQLite files in a temporary directory.
@Suite final class PersistentStoreTests {
    let dir = URL(fileURLWithPath: TestDirectory.root + "ember-store-test-" + UUID().uuidString)
    deinit { try? FileManager.default.removeItem(at: dir) }
    var file: URL { dir.appendingPathComponent("cache.sqlite") }

    func p(_ s: String) throws -> Path { try Path(s) }
    func n(_ json: String) throws -> Node { try Node(json: try JSON.parse(json)) }

    @Test func overwritesAndMergesAtAnyDepthReadBackAcrossReopen() throws {
        do {
            let store = try PersistentStore(file: file)
            try store.overwriteServerCache(at: p("users/ada"), with: n(#"{"name":"Ada","born":1815}"#))
            try store.overwriteServerCache(at: p("users/alan"), with: n(#"{"name":"Alan"}"#))
            // A write inside an existing row, and a merge across rows.
            try store.overwriteServerCache(at: p("users/ada/born"), with: n("1816"))
            try store.mergeServerCache(at: p("users"), [(try p("alan/born"), try n("1912")), (try p("grace"), try n(#"{"name":"Grace"}"#))])
            #expect(try store.serverCache(at: p("users/ada/born")) == n("1816"))
            #expect(try store.serverCache(at: p("nobody")) == nil)
        }
        // A new store on the same file sees the same data.
        let store = try PersistentStore(file: file)
        #expect(try store.serverCache(at: p("users")) == n(#"{"ada":{"name":"Ada","born":1816},"alan":{"name":"Alan","born":1912},"grace":{"name":"Grace"}}"#))
        // A write above rows replaces them; a deletion inside a row removes the child.
        try store.overwriteServerCache(at: p("users"), with: n(#"{"bob":{"name":"Bob"}}"#))
        #expect(try store.serverCache(at: p("users/ada")) == .empty)
        try store.overwriteServerCache(at: p("users/bob/name"), with: .empty)
        #expect(try store.serverCache(at: p("users")) == .empty)
        // Known-empty is still known.
        #expect(try store.serverCache(at: p("users")) != nil)
        // Priorities survive.
        try store.overwriteServerCache(at: p("ranked"), with: n(#"{".value":"x",".priority":3}"#))
        #expect(try store.serverCache(at: p("ranked"))?.priority != nil)
    }

    @Test func rootWritesAndKeysWithUnusualCharactersStayApart() throws {
        let store = try PersistentStore(file: file)
        try store.overwriteServerCache(at: .root, with: n(#"{"a":{"x":1},"a b":{"y":2},"a0":3,"ä":4}"#))
        try store.overwriteServerCache(at: p("a b/y"), with: n("5"))
        try store.overwriteServerCache(at: p("a"), with: n(#"{"x":9}"#))
        #expect(try store.serverCache(at: .root) == n(#"{"a":{"x":9},"a b":{"y":5},"a0":3,"ä":4}"#))
        try store.overwriteServerCache(at: .root, with: .empty)
        try store.overwriteServerCache(at: p("a"), with: n("1"))
        try store.overwriteServerCache(at: p("a0"), with: n("2"))
        // `a`'s range must not take `a0` with it.
        try store.overwriteServerCache(at: p("a"), with: n("3"))
        #expect(try store.serverCache(at: p("a0")) == n("2"))
    }

    /// Random overwrites and merges, some large enough to be split into child rows, against an
    /// in-memory tree: every read agrees with it, and large data is kept in more than one row.
    @Test(.printsSeedOnFailure) func randomWritesAgreeWithAnInMemoryTree() throws {
        let store = try PersistentStore(file: file)
        var model = Node.empty
        var rng = TestSeed.generator(14)
        let keys = ["a", "b", "c"]
        func randomPath() -> Path {
            Path(validated: (0..<Int.random(in: 0...3, using: &rng)).map { _ in keys.randomElement(using: &rng)! })
        }
        func randomNode(depth: Int) -> Node {
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: return .empty
            case 1: return Node(.int(Int64.random(in: 0..<100, using: &rng)))
            case 2: return Node(.string(String(repeating: "s", count: 6000)))
            default:
                guard depth < 3 else { return Node(.bool(true)) }
                var children: KeyMap<Node> = [:]
                for key in keys where Bool.random(using: &rng) { children[key] = randomNode(depth: depth + 1) }
                return Node(children: children)
            }
        }
        var maxRows = 0
        for _ in 0..<300 {
            let path = randomPath()
            if Bool.random(using: &rng) {
                let node = randomNode(depth: path.count)
                try store.overwriteServerCache(at: path, with: node)
                model = model.setting(node, at: path)
            } else {
                let children = (0..<Int.random(in: 1...3, using: &rng)).map { _ in
                    (Path(validated: [keys.randomElement(using: &rng)!]), randomNode(depth: path.count + 1))
                }
                try store.mergeServerCache(at: path, children)
                for (rel, node) in children { model = model.setting(node, at: path.appending(rel)) }
            }
            #expect((try store.serverCache(at: .root) ?? .empty) == model)
            let probe = randomPath()
            #expect((try store.serverCache(at: probe) ?? .empty) == model.child(at: probe))
            maxRows = max(maxRows, try store.db.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM server_cache") ?? 0 })
        }
        #expect(maxRows > 3)
    }

    @Test func queuedWritesKeepTheirOrderAndLeaveWhenFinished() throws {
        do {
            let store = try PersistentStore(file: file)
            try store.saveWrite(StoredWrite(id: 1, path: try p("a"), kind: .set, data: .int(1)))
            try store.saveWrite(StoredWrite(id: 2, path: .root, kind: .merge, data: .object(["a/b": .int(2), "c": .object([".sv": .string("timestamp")])])))
            try store.saveWrite(StoredWrite(id: 3, path: try p("d"), kind: .set, data: .null))
            try store.removeWrite(id: 1)
        }
        let store = try PersistentStore(file: file)
        let writes = try store.writes()
        #expect(writes.map(\.id) == [2, 3])
        // Server values stay placeholders, to be resolved by the server.
        #expect(writes[0].data == .object(["a/b": .int(2), "c": .object([".sv": .string("timestamp")])]))
        #expect(writes[1] == StoredWrite(id: 3, path: try p("d"), kind: .set, data: .null))
    }

    @Test func completenessComesFromCompleteQueriesAtOrAboveAPath() throws {
        let store = try PersistentStore(file: file)
        let users = SyncQuery(path: try p("users"))
        try store.touchQuery(users, active: true)
        #expect(try store.isComplete(at: p("users/ada")) == false)
        try store.setQueryComplete(users)
        #expect(try store.isComplete(at: p("users/ada")))
        #expect(try store.isComplete(at: p("users")))
        #expect(try store.isComplete(at: .root) == false)
        // Reopening: nothing is active in the new run, completeness is kept.
        let again = try PersistentStore(file: file)
        let tracked = try again.trackedQueries()
        #expect(tracked.count == 1 && tracked[0].complete && !tracked[0].active)
    }

    @Test func pruningDropsLeastRecentlyUsedDataButNeverListenedOrKeptPaths() throws {
        let store = try PersistentStore(file: file)
        let big = String(repeating: "x", count: 1000)
        for name in ["old", "kept", "listened", "recent"] {
            // `old/child` is data below a pruned path that a listener uses: it stays.
            let node = name == "old" ? Node(children: ["big": Node(.string(big)), "child": Node(.string("small"))])
                : Node(.string(big))
            try store.overwriteServerCache(at: p(name), with: node)
            try store.touchQuery(SyncQuery(path: try p(name)), active: true)
            try store.setQueryComplete(SyncQuery(path: try p(name)))
        }
        try store.setKeepSynced(SyncQuery(path: try p("kept")), true)
        for name in ["old", "kept", "listened", "recent"] { try store.touchQuery(SyncQuery(path: try p(name)), active: false) }
        try store.touchQuery(SyncQuery(path: try p("recent")), active: false)

        // Under the limit nothing happens.
        #expect(try store.pruneIfNeeded(limit: 10_000, protected: []).prunedQueries.isEmpty)
        let result = try store.pruneIfNeeded(limit: 3100, protected: [try p("listened"), try p("old/child")])
        #expect(result.prunedQueries == [try p("old")])
        #expect(result.sizeBefore > 4000 && result.sizeAfter <= 3100)
        #expect(try store.serverCache(at: p("old")) == n(#"{"child":"small"}"#))
        #expect(try store.isComplete(at: p("old")) == false)
        #expect(try store.serverCache(at: p("kept")) == Node(.string(big)))
        #expect(try store.serverCache(at: p("listened")) == Node(.string(big)))
        // Tighter: `recent` goes too; kept and listened data never does, even over the limit.
        let tight = try store.pruneIfNeeded(limit: 100, protected: [try p("listened")])
        #expect(tight.prunedQueries == [try p("recent")])
        #expect(try store.serverCache(at: p("recent")) == nil)
        #expect(try store.serverCache(at: p("kept")) != nil)
        #expect(try store.serverCache(at: p("listened")) != nil)
        // A listened path keeps its completeness too.
        #expect(try store.isComplete(at: p("listened")))
    }

    @Test func unreadableFileIsMovedAsideAndReplaced() throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try Data("this is not a database, not even close to one".utf8).write(to: file)
        let store = try #require(PersistentStore.openRecovering(file: file, logger: .init(label: "test")))
        try store.overwriteServerCache(at: p("a"), with: n("1"))
        #expect(try store.serverCache(at: p("a")) == n("1"))
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(names.contains { $0.hasPrefix("cache.sqlite.corrupt-") })
    }

    @Test func damagedFileKeepsItsReadableQueuedWrites() throws {
        do {
            let store = try PersistentStore(file: file)
            try store.saveWrite(StoredWrite(id: 7, path: try p("a"), kind: .set, data: .string("keep me")))
            // A lost table: the file is unusable as a whole, but its queue can still be read.
            try store.db.write { db in try db.execute(sql: "DROP TABLE server_cache") }
        }
        #expect(throws: (any Error).self) { try PersistentStore(file: file) }
        let store = try #require(PersistentStore.openRecovering(file: file, logger: .init(label: "test")))
        #expect(try store.serverCache(at: p("a")) == nil)
        #expect(try store.writes() == [StoredWrite(id: 7, path: try p("a"), kind: .set, data: .string("keep me"))])
    }

    @Test func fileFromANewerClientIsNotMisread() throws {
        do {
            let store = try PersistentStore(file: file)
            try store.db.write { db in try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99')") }
        }
        #expect(throws: PersistentStore.StoreError.self) { try PersistentStore(file: file) }
    }

    /// The file damaged under a running client: logged, never a crash, the cache is left alone
    /// for the rest of the run, and the next start replaces it.
    @Test func fileDamagedWhileInUseTurnsTheCacheOffWithAnError() throws {
        let log = CapturedLog()
        let store = try PersistentStore(file: file)
        let manager = PersistenceManager(store: store, cacheSizeBytes: 1 << 20, logger: log.logger)
        manager.serverOverwrite(try p("a"), try n(#"{"x":1}"#))
        manager.saveWrite(StoredWrite(id: 1, path: try p("a"), kind: .set, data: .int(1)))
        // Garbage over the whole file, header included, behind SQLite's back.
        let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as! Int
        let handle = try FileHandle(forWritingTo: file)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: max(size, 4096)))
        try handle.close()
        // The write-ahead log and its index too, so SQLite cannot serve the pages from them.
        for suffix in ["-wal", "-shm"] {
            let path = file.path + suffix
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            guard size > 0 else { continue }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.write(contentsOf: Data(repeating: suffix == "-shm" ? 0 : 0xA5, count: size))
            try handle.close()
        }

        var damaged = false
        for i in 0..<5 where !damaged {
            manager.serverOverwrite(try p("b\(i)"), try n("1"))
            _ = manager.completeServerCache(for: SyncQuery(path: try p("a")))
            damaged = manager.isBroken
        }
        #expect(damaged, "\(log.all)")
        #expect(log.all.contains { $0.hasPrefix("error") && $0.contains("is damaged") })
        // Writes from now on are not kept, and the log says so.
        manager.saveWrite(StoredWrite(id: 2, path: try p("c"), kind: .set, data: .int(2)))
        #expect(log.all.contains { $0.hasPrefix("error") && $0.contains("save the write to /c") })
        // The next start replaces the file.
        let fresh = try #require(PersistentStore.openRecovering(file: file, logger: log.logger))
        #expect(try fresh.serverCache(at: p("a")) == nil)
    }

    @Test func fileNamesDifferPerDatabaseURL() {
        let a = PersistenceSettings.fileName(forDatabaseURL: "http://127.0.0.1:9000?ns=a")
        let b = PersistenceSettings.fileName(forDatabaseURL: "http://127.0.0.1:9000?ns=b")
        let c = PersistenceSettings.fileName(forDatabaseURL: "http://127.0.0.1:9000?ns=a/")
        #expect(Set([a, b, c]).count == 3)
        #expect(a == PersistenceSettings.fileName(forDatabaseURL: "http://127.0.0.1:9000?ns=a"))
        #expect(!a.contains("/") && a.hasSuffix(".sqlite"))
    }

    @Test func settingsAfterFirstUseOrOutOfRangeStopTheProgram() async {
        await #expect(processExitsWith: .failure) {
            let db = Database(url: "http://127.0.0.1:1?ns=x")
            _ = db.reference(withPath: "a").observe(.value) { _ in }
            db.isPersistenceEnabled = true
        }
        await #expect(processExitsWith: .failure) {
            let db = Database(url: "http://127.0.0.1:1?ns=x")
            db.persistenceCacheSizeBytes = 512 * 1024
        }
        await #expect(processExitsWith: .failure) {
            let db = Database(url: "http://127.0.0.1:1?ns=x")
            db.persistenceCacheSizeBytes = 101 * 1024 * 1024
        }
        let db = Database(url: "http://127.0.0.1:1?ns=x")
        #expect(db.persistenceCacheSizeBytes == 10 * 1024 * 1024)
        db.persistenceCacheSizeBytes = 1024 * 1024
        db.isPersistenceEnabled = true
        #expect(db.isPersistenceEnabled)
        db.shutdown()
    }
}

/// Keeps what a logger was told, for tests that check the log.
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func add(_ line: String) { lines.withLock { $0.append(line) } }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(log: self) }
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            log.add("\(event.level) \(event.message)")
        }
    }
}
