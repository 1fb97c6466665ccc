import EmberTestSupport
import EmberCore
import Foundation
import Logging
import Synchronization
import Testing

@testable import EmberNodeStore

/// The ports of a single node over a real LMDB store (`LMDBDataStore.ports`): what each role
/// port does, and what every client port refuses.
@Suite struct NodePortsTests {
    static func open() throws -> (LMDBDataStore, String) {
        let dir = TestDirectory.root + "ember-ports-\(UUID().uuidString)"
        return (try LMDBDataStore(directory: dir, options: .init(), logger: Logger(label: "test")), dir)
    }

    static func set(_ ports: NodePorts, _ ns: String, _ path: String, _ json: JSON, as identity: Identity = .admin) async throws -> WriteOutcome {
        try await ports.writer.write(WriteRequest(namespace: ns, path: try Path(path), kind: .set(json), identity: identity))
    }

    /// The store's own namespaces (onDisconnect bookkeeping, the record of writers) are 403 on
    /// every client port, including pipelined writes (refused at once; the others go on).
    @Test func reservedNamespacesAreRefusedEverywhere() async throws {
        let (store, _) = try Self.open()
        defer { store.close() }
        let ports = store.ports
        func forbidden(_ body: () async throws -> Void) async {
            do { try await body(); Issue.record("not refused") } catch let e as StoreRefusal { #expect(e.status == 403) } catch {
                Issue.record("\(error)")
            }
        }
        for ns in [OnDisconnectCommand.bookkeepingNamespace, "_ember_writers"] {
            await forbidden { _ = try ports.reader.read(namespace: ns, path: .root) }
            await forbidden { _ = try ports.reader.shallowKeys(namespace: ns, path: .root, after: nil, limit: 10) }
            await forbidden { _ = try ports.reader.query(namespace: ns, path: .root, query: .default) }
            await forbidden { try await ports.reader.prepareQueries(namespace: ns) }
            await forbidden { _ = try ports.reader.withRulesData(namespace: ns) { _ in true } }
            await forbidden { _ = try await Self.set(ports, ns, "/x", .int(1)) }
            await forbidden { try await ports.rules.setRules(namespace: ns, text: #"{"rules": {}}"#) }
            let sink = Outcomes()
            let writer = try #require(ports.writer.pipelinedWriter(sink: sink))
            let refused = writer.enqueue([
                (1, WriteRequest(namespace: ns, path: try Path("/x"), kind: .set(.int(1)), identity: .admin)),
                (2, WriteRequest(namespace: "t", path: try Path("/x"), kind: .set(.int(2)), identity: .admin)),
            ])
            #expect(refused.map(\.tag) == [1] && (refused.first?.error as? StoreRefusal)?.status == 403)
            let done = try await sink.next()
            #expect(done.map(\.tag) == [2])
        }
        // A cluster member reserves its membership namespace on the same read port.
        let member = LMDBReads(store: store.storage, refuseReserved: { ns in
            if ns == "_members" { throw StoreRefusal.forbidden("reserved") }
            try LMDBTranslation.refuseReserved(ns)
        })
        await forbidden { _ = try member.read(namespace: "_members", path: .root) }
        #expect(try member.read(namespace: "t", path: try Path("/x")).node == Node(.int(2)))
    }

    /// Each commit's changes reach the feed before its write is answered: a set at its path, an
    /// update as a merge of its parts; hidden namespaces never reach listeners.
    @Test func theCommitFeedCarriesEachCommitsChanges() async throws {
        let (store, _) = try Self.open()
        defer { store.close() }
        let ports = store.ports
        let seen = Mutex<[CommittedChange]>([])
        let batches = Mutex<[Int]>([])
        LMDBCommitFeed(store: store.storage, hiddenNamespaces: ["hidden"]).onCommit { c in seen.withLock { $0 += c } }
        ports.commits.onBatchCommitted { n in batches.withLock { $0.append(n) } }
        let first = try await Self.set(ports, "t", "/a", .object(["b": .int(1)]))
        _ = try await ports.writer.write(WriteRequest(namespace: "t", path: try Path("/a"),
                                                      kind: .update([(try Path("c"), .int(2))]), identity: .admin))
        _ = try await Self.set(ports, "hidden", "/z", .int(3))
        let changes = seen.withLock { $0 }
        #expect(changes.count == 2 && changes[0].index == first.index && changes.allSatisfy { $0.namespace == "t" })
        guard case .set(let node) = changes[0].kind, case .merge(let parts) = changes[1].kind else {
            Issue.record("kinds: \(changes.map(\.kind))"); return
        }
        let expected = try Node(json: .object(["b": .int(1)])), c = try Path("c")
        #expect(node == expected && parts.map(\.0) == [c])
        #expect(batches.withLock { $0 }.reduce(0, +) == 3)
    }

    /// With a `watched` check the feed builds only the watched namespaces' changes (hidden ones
    /// never), asking once per commit; a commit of namespaces nobody watches calls nothing.
    @Test func theWatchedCommitFeedSkipsNamespacesNobodyWatches() async throws {
        let (store, _) = try Self.open()
        defer { store.close() }
        let ports = store.ports
        let watching = Mutex<Set<String>>([])
        let asked = Mutex(0)
        let seen = Mutex<[[CommittedChange]]>([])
        LMDBCommitFeed(store: store.storage, hiddenNamespaces: ["hidden"]).onCommit(watched: {
            asked.withLock { $0 += 1 }
            return watching.withLock { $0 }
        }) { c in seen.withLock { $0.append(c) } }
        _ = try await Self.set(ports, "t", "/a", .int(1))
        #expect(asked.withLock { $0 } == 1)
        #expect(seen.withLock { $0 }.isEmpty, "a commit nobody watches reached the handler")
        watching.withLock { $0 = ["t", "hidden"] }
        let second = try await Self.set(ports, "t", "/a", .int(2))
        _ = try await Self.set(ports, "u", "/b", .int(3))
        _ = try await Self.set(ports, "hidden", "/z", .int(4))
        let batches = seen.withLock { $0 }
        #expect(asked.withLock { $0 } == 4)
        #expect(batches.count == 1 && batches[0].map(\.index) == [second.index] && batches[0][0].namespace == "t")
        guard case .set(let node)? = batches.first?.first?.kind else { Issue.record("kinds: \(batches)"); return }
        #expect(node == Node(.int(2)))
    }

    /// Stored rules judge writes at apply and are what the rules port reports; bad rules are 400.
    @Test func rulesAreStoredAndJudgeWrites() async throws {
        let (store, _) = try Self.open()
        defer { store.close() }
        let ports = store.ports
        let changed = Mutex<[String]>([])
        ports.rules.onRulesChanged { ns in changed.withLock { $0.append(ns) } }
        do { try await ports.rules.setRules(namespace: "t", text: "{"); Issue.record("bad rules stored") } catch let e as StoreRefusal {
            #expect(e.status == 400)
        }
        let text = #"{"rules": {".read": true, ".write": "auth != null"}}"#
        try await ports.rules.setRules(namespace: "t", text: text)
        #expect(ports.rules.storedRules(namespace: "t")?.text == text && ports.rules.storedRules(namespace: "u") == nil)
        #expect(changed.withLock { $0 } == ["t"])
        await #expect(throws: PermissionDenied.self) { _ = try await Self.set(ports, "t", "/x", .int(1), as: .anonymous) }
        #expect(try await Self.set(ports, "t", "/x", .int(1), as: .user(claims: .object(["uid": .string("u1")]), now: 0)).applied)
    }

    /// onDisconnect bookkeeping through the port: a holder, a registered write, a run.
    @Test func onDisconnectCommandsAreLoggedAndRead() async throws {
        let (store, _) = try Self.open()
        defer { store.close() }
        let ports = store.ports, od = ports.onDisconnect
        let ref = OnDisconnectRef(node: "single", incarnation: "i1", id: "s1")
        #expect(try await od.log(.holder(node: "single", incarnation: "i1"), namespace: OnDisconnectCommand.bookkeepingNamespace,
                                 identity: .admin))
        let write = OnDisconnectWrite(path: try Path("/p"), kind: .set(.object(["a": .int(1), "b": .int(2)])))
        #expect(try await od.log(.register(session: ref, write: write), namespace: "t", identity: .admin))
        #expect(try od.holders() == ["single": "i1"])
        #expect(try od.sessions(limit: 10) { _, _, _, _ in true }.map(\.session) == [ref])
        _ = try await od.log(.cancel(session: ref, path: try Path("/p/a")), namespace: "t", identity: .admin)
        #expect(try await od.log(.run(session: ref), namespace: "t", identity: .admin))
        let remaining = try Node(json: .object(["b": .int(2)]))
        #expect(try ports.reader.read(namespace: "t", path: try Path("/p")).node == remaining)
        #expect(try od.sessions(limit: 10) { _, _, _, _ in true }.isEmpty)
        // A registration of an incarnation that does not hold its node's sessions is refused.
        let stale = OnDisconnectRef(node: "single", incarnation: "i0", id: "s2")
        #expect(try await od.log(.register(session: stale, write: write), namespace: "t", identity: .admin) == false)
        // The same cancel, kept locally by a session: the set above is split into its other children.
        let kept = OnDisconnectWrite.cancel([write], at: try Path("/p/a"))
        guard kept.count == 1, case .update(let parts) = kept[0].kind else { Issue.record("\(kept)"); return }
        let b = try Path("b")
        #expect(parts.map(\.0) == [b])
    }

    /// The admin ports read the store's figures, back it up and defragment it.
    @Test func adminPortsServeTheOperationsEndpoints() async throws {
        let (store, dir) = try Self.open()
        defer { store.close() }
        let ports = store.ports
        for i in 0..<20 { _ = try await Self.set(ports, "t", "/k\(i)", .string(String(repeating: "x", count: 500))) }
        let stats = try #require(ports.admin.storage)
        #expect(stats.counters.commits >= 20 && stats.lastDefrag == nil && !stats.defragRunning)
        let before = try stats.footprint()
        guard case .object(let fp) = before.json else { Issue.record("footprint"); return }
        #expect(before.fileBytes > 0 && fp["tables"] != nil)
        let file = dir + "/backup.ember"
        #expect(try #require(ports.admin.backup).writeBackup(to: file).appliedIndex == ports.reader.appliedIndex)
        #expect(FileManager.default.fileExists(atPath: file))
        let report = try await #require(ports.admin.defrag).defrag()
        #expect(report.bytesAfter > 0 && stats.lastDefrag?.finishedAtMs == report.finishedAtMs)
        #expect(try ports.reader.read(namespace: "t", path: try Path("/k3")).node == Node(.string(String(repeating: "x", count: 500))))
        #expect(ports.admin.cluster == nil && ports.admin.status.memberDirectory == nil)
        guard case .object(let status) = try await ports.admin.status.nodeStatus() else { Issue.record("status"); return }
        #expect(status["role"] == .string("leader") && status["stateHash"] != nil)
    }
}

/// A pipelined writer's sink that hands its calls to the test in order.
final class Outcomes: WriteOutcomeSink {
    private let calls = Mutex<[[(tag: UInt64, outcome: Result<WriteOutcome, any Error>)]]>([])
    private let signal = AsyncStream<Void>.makeStream()

    func completed(_ outcomes: [(tag: UInt64, outcome: Result<WriteOutcome, any Error>)]) {
        calls.withLock { $0.append(outcomes) }
        signal.continuation.yield()
    }

    /// The next call's outcomes (waits for it).
    func next() async throws -> [(tag: UInt64, outcome: Result<WriteOutcome, any Error>)] {
        for await _ in signal.stream {
            if let c = calls.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return c }
        }
        throw CancellationError()
    }
}
