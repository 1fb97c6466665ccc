import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberClient

/// Offline persistence across process lifetimes: a probe process (`ember-persistence-probe`) with
/// persistence on is SIGKILLed and started again against real emberd processes.
@Suite(.serialized, .timeLimit(.minutes(2))) struct PersistenceProcessTests {
    static func tempDir() -> String {
        let dir = TestDirectory.root + "ember-persist-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    static func cacheFile(dir: String, url: String) -> URL {
        URL(fileURLWithPath: dir).appendingPathComponent(PersistenceSettings.fileName(forDatabaseURL: url))
    }

    @Test func writesQueuedBeforeAKillLandOnceAndInOrderAfterRestart() async throws {
        // The cache file is named after the URL, which the client has before the node first
        // starts: the port is picked up front here (the server cannot report it yet).
        let server = try EmberServerProcess(port: FreePorts.one())
        let url = server.databaseURL(ns: "killed")
        let dir = Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let count = 20

        // 1. The node is down: the writes can only be queued. Then the app is killed.
        let first = try ProbeProcess("queue-writes", url: url, cacheDir: dir, [String(count)])
        try await first.waitForLine("QUEUED")
        first.kill()
        do {
            let store = try PersistentStore(file: Self.cacheFile(dir: dir, url: url))
            let writes = try store.writes()
            #expect(writes.count == 3 * count + 1)
            #expect(writes.map(\.id) == writes.map(\.id).sorted())
            #expect(writes[writes.count - 2].path == .root && writes[writes.count - 2].kind == .merge)
            #expect(writes.last?.data == .object([".sv": .string("timestamp")]))
        }

        // 2. The node is up; an observer records every value /counter takes on the server.
        try await server.start()
        defer { server.stop() }
        let observer = Database(url: url, configuration: .fastReconnect)
        defer { observer.shutdown() }
        let counter = Recorder()
        observer.reference(withPath: "counter").observe(.value) { s in
            counter.add((s.value as? Int).map(String.init) ?? "none")
        }
        // The first (empty) value comes once the server has the listen: nothing can be missed.
        await counter.wait { $0 == ["none"] }

        // 3. The app starts again: the writes from the last run go out, in order, once.
        let restartedAt = Int64(Date().timeIntervalSince1970 * 1000)
        let second = try ProbeProcess("show", url: url, cacheDir: dir, ["log"])
        try await second.waitForLine("ACKED")
        await counter.wait(timeout: .seconds(15)) { $0.last == "\(count - 1)" }
        #expect(counter.all == ["none"] + (0..<count).map(String.init))
        let log = try #require(try await server.restGet("log", ns: "killed").objectValue)
        #expect(log.count == count)
        // Push ids sort by creation time: in key order the values count up.
        let ns = log.keys.sorted().map { log[$0]?["n"] }
        #expect(ns == (0..<count).map { JSON.int(Int64($0)) })
        #expect(try await server.restGet("multi", ns: "killed") == .object(["a": .int(Int64(count - 1)), "b": .int(Int64(count - 1))]))
        // Resolved by the server after the restart, not when the write was queued.
        let stamp = try await server.restGet("stamp", ns: "killed")
        guard case .int(let ms) = stamp else { Issue.record("stamp is \(stamp)"); return }
        #expect(ms >= restartedAt)
        second.kill()
        // Every write was acknowledged before the marker: nothing is left to send again.
        let store = try PersistentStore(file: Self.cacheFile(dir: dir, url: url))
        #expect(try store.writes().isEmpty)
    }

    /// The worst moment to die: the node applied the writes, the app never heard so (the node's
    /// answers are muted by a proxy), and it is killed with the writes still queued on disk. The
    /// next run sends them again with their stamps; the node answers without applying them twice.
    @Test func writesTheNodeAppliedButTheAppNeverSawAcknowledgedCountOnceAfterAKill() async throws {
        let server = try EmberServerProcess()
        try await server.start()
        defer { server.stop() }
        let proxy = try ReplyMutingProxy(target: server.port)
        defer { proxy.close() }
        let url = "http://127.0.0.1:\(proxy.port)?ns=lostacks"
        let dir = Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let go = dir + "/go"
        let count = 12

        let first = try ProbeProcess("increments", url: url, cacheDir: dir, [String(count), go])
        try await first.waitForLine("CONNECTED")
        proxy.muteReplies()
        FileManager.default.createFile(atPath: go, contents: Data())
        try await first.waitForLine("SENT")
        let deadline = ContinuousClock.now + .seconds(15)
        while try await server.restGet("count", ns: "lostacks") != .int(Int64(count)), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(try await server.restGet("count", ns: "lostacks") == .int(Int64(count)))
        first.kill()
        // Every write is still queued: the app never saw an acknowledgement.
        #expect(try PersistentStore(file: Self.cacheFile(dir: dir, url: url)).writes().count == count)

        proxy.cutAndPass()
        let second = try ProbeProcess("show", url: url, cacheDir: dir, ["count"])
        defer { second.kill() }
        try await second.waitForLine("ACKED")
        #expect(try await server.restGet("count", ns: "lostacks") == .int(Int64(count)))
        #expect(try await server.restGet("last", ns: "lostacks") == .int(Int64(count - 1)))
        second.kill()
        #expect(try PersistentStore(file: Self.cacheFile(dir: dir, url: url)).writes().isEmpty)
    }

    /// Restored writes the server refuses are rolled back and dropped from the queue, each with an
    /// error in the log; the others land.
    @Test func restoredWritesTheServerRejectsAreLoggedAndDropped() async throws {
        let rules = #"""
        {"rules": {"log": {".read": true, ".write": true}, "multi": {".read": true, ".write": true},
                   "counter": {".read": true, ".write": false}, "markers": {".write": true}}}
        """#
        // The client queues before the node first starts: the port is picked up front.
        let server = try EmberServerProcess(port: FreePorts.one(), rules: rules)
        let url = server.databaseURL(ns: "rejected")
        let dir = Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try ProbeProcess("queue-writes", url: url, cacheDir: dir, ["5"])
        try await first.waitForLine("QUEUED")
        first.kill()

        try await server.start()
        defer { server.stop() }
        let second = try ProbeProcess("show", url: url, cacheDir: dir, ["log"])
        try await second.waitForLine("ACKED")
        func rejections(_ text: String) -> Int {
            text.components(separatedBy: "\n").filter { $0.contains("rejected write") && $0.contains("/counter") }.count
        }
        try await second.waitForStderr { rejections($0) >= 5 }
        second.kill()
        #expect(rejections(second.stderr) == 5, "\(second.stderr)")
        #expect(try await server.restGet("log", ns: "rejected").objectValue?.count == 5)
        #expect(try await server.restGet("multi", ns: "rejected") == .object(["a": .int(4), "b": .int(4)]))
        #expect(try await server.restGet("counter", ns: "rejected") == .null)
        let store = try PersistentStore(file: Self.cacheFile(dir: dir, url: url))
        #expect(try store.writes().isEmpty)
    }

    @Test func restartedOfflineClientShowsCachedDataAndQueuedLocalWritesAtOnce() async throws {
        let server = try EmberServerProcess()
        try await server.start()
        defer { server.stop() }
        let url = server.databaseURL(ns: "restart")
        try await server.restPut("items", ns: "restart", json: #"{"a":1,"b":2}"#)
        let dir = Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }

        // 1. Synced online, then offline with two local writes, then killed.
        let first = try ProbeProcess("seed-then-offline", url: url, cacheDir: dir)
        try await first.waitForLine("SYNCED")
        try await first.waitForLine(#"VALUE {"a":10,"b":2,"c":3}"#)
        first.kill()
        server.stop()

        // 2. Started again with the node down: everything comes from the disk.
        let second = try ProbeProcess("show", url: url, cacheDir: dir, ["items"])
        defer { second.kill() }
        let firstValue = try await second.waitForLine("VALUE")
        #expect(firstValue == #"VALUE {"a":10,"b":2,"c":3}"#)
        #expect(try await second.waitForLine("SINGLE") == "SINGLE 2")
        // getData waits for a connection first (3 s), then answers from the cache with the
        // queued write applied.
        #expect(try await second.waitForLine("GET", timeout: .seconds(15)) == "GET 10")
        #expect(second.lines.contains("CONNECTED false"))
        #expect(!second.lines.contains("CONNECTED true"))
        #expect(second.lines.filter { $0.hasPrefix("VALUE") } == [#"VALUE {"a":10,"b":2,"c":3}"#])

        // 3. The node returns: the queued writes land.
        try await server.start()
        try await second.waitForLine("ACKED")
        #expect(try await server.restGet("items", ns: "restart") == .object(["a": .int(10), "b": .int(2), "c": .int(3)]))
    }

    @Test func corruptCacheFileIsReportedMovedAsideAndReplaced() async throws {
        let server = try EmberServerProcess()
        try await server.start()
        defer { server.stop() }
        let url = server.databaseURL(ns: "corrupt")
        try await server.restPut("items", ns: "corrupt", json: #"{"a":1,"b":2}"#)
        let dir = Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = Self.cacheFile(dir: dir, url: url)
        try Data(repeating: 0x5A, count: 4096).write(to: file)

        let probe = try ProbeProcess("show", url: url, cacheDir: dir, ["items"])
        defer { probe.kill() }
        #expect(try await probe.waitForLine("VALUE") == #"VALUE {"a":1,"b":2}"#)
        try await probe.waitForLine("ACKED")
        try await probe.waitForStderr { $0.contains("is unreadable") && $0.contains("could not be read") }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir)
        let aside = try #require(names.first { $0.hasPrefix(file.lastPathComponent + ".corrupt-") })
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir).appendingPathComponent(aside)) == Data(repeating: 0x5A, count: 4096))
        // The replacement is a working cache: it holds what was synced since.
        probe.kill()
        let store = try PersistentStore(file: file)
        #expect(try store.serverCache(at: try Path("items")) == (try Node(json: .object(["a": .int(1), "b": .int(2)]))))
    }
}
