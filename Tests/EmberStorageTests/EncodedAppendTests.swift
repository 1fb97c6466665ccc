import EmberCore
import Foundation
import Synchronization
import Testing
@testable import EmberStorage

/// A Raft host appends entries encoded (`EncodedEntry`), the ones it has not decoded left to the
/// store's writer (issue 42: a follower decoded each multi-MB entry on its loop): the same log,
/// results and state as appending them decoded; a bad encoding fails the append and stores nothing.
@Suite struct EncodedAppendTests {
    /// The leader's entries, as a host would hand them over: every other one decoded.
    func encoded(_ es: [LogEntry], decodedEvery k: Int = 2) -> [EncodedEntry] {
        es.enumerated().map { i, e in EncodedEntry(index: e.index, term: e.term, encoded: e.encoded(), decoded: i % k == 0 ? e : nil) }
    }

    @Test func appendsAndAppliesAsDecodedEntriesDo() async throws {
        let leader = try openStore()
        try await leader.setHardState(HardState(term: 2, votedFor: "n1"))
        for i in 0..<10 { try await leader.set("/r/\(i)", #"{"v": \#(i), "s": "x\#(i)", ".priority": \#(i)}"#) }
        let es = try leader.entries(from: 1)
        let decoded = try openStore(), raw = try openStore()
        try await decoded.append(entries: Array(es[0..<4]))
        try await raw.append(encoded: encoded(Array(es[0..<4])))
        #expect(raw.lastLogIndex == 4 && raw.appliedIndex == 0)
        let a = try await decoded.appendAndApply(entries: Array(es[4..<7]), through: 5)
        let b = try await raw.appendAndApply(encoded: encoded(Array(es[4..<7]), decodedEvery: 3), through: 5)
        #expect(a == b && b.map(\.index) == [1, 2, 3, 4, 5])
        let (c, release) = try await raw.appendAndApplyReleasing(encoded: encoded(Array(es[7...]), decodedEvery: 5), through: 10)
        await raw.committed(release)
        #expect(c.map(\.index) == [6, 7, 8, 9, 10])
        try await decoded.appendAndApply(entries: Array(es[7...]), through: 10)
        #expect(try raw.stateHash() == leader.stateHash() && decoded.stateHash() == leader.stateHash())
        #expect(try raw.entries(from: 1).map { $0.encoded() } == es.map { $0.encoded() })
    }

    @Test func startPersistDecodesOnTheWriter() async throws {
        let leader = try openStore()
        for i in 0..<3 { try await leader.set("/r/\(i)", "\(i)") }
        let es = try leader.entries(from: 1)
        let f = try openStore()
        let outcome = Mutex<Result<[WriteResult], any Error>?>(nil)
        #expect(f.startPersist(hardState: HardState(term: 1, votedFor: nil), encoded: encoded(es, decodedEvery: 100)) { r in
            outcome.withLock { $0 = r }
        })
        await f.writerBarrier()
        let r = outcome.withLock { $0 }
        #expect(r != nil)
        #expect(try r?.get().isEmpty == true)
        #expect(f.lastLogIndex == 3 && f.appliedIndex == 0)
        #expect(try await f.appendAndApply(encoded: [], through: 3).map(\.index) == [1, 2, 3])
        #expect(try f.get("/r/2") == n("2"))
    }

    /// A persist queued off a follower's loop carries its small apply (RaftHost+QueuedPersist):
    /// appended and applied in one transaction, the results handed back with the persist.
    @Test func startPersistAppliesThroughTheGivenIndexInItsTransaction() async throws {
        let leader = try openStore()
        for i in 0..<4 { try await leader.set("/r/\(i)", "\(i)") }
        let es = try leader.entries(from: 1)
        let f = try openStore()
        try await f.append(encoded: encoded(Array(es.prefix(1)), decodedEvery: 1))
        let outcome = Mutex<Result<[WriteResult], any Error>?>(nil)
        #expect(f.startPersist(hardState: nil, encoded: encoded(Array(es.dropFirst()), decodedEvery: 100), applyingThrough: 3) { r in
            outcome.withLock { $0 = r }
        })
        await f.writerBarrier()
        #expect(try outcome.withLock { $0 }?.get().map(\.index) == [1, 2, 3])
        #expect(f.lastLogIndex == 4 && f.appliedIndex == 3)
        #expect(try f.get("/r/2") == n("2"))
        #expect(try f.get("/r/3") == .empty)
    }

    /// An encoding that is no entry, or names another index or term than it is appended at, or
    /// an entry of a bad namespace: the append fails and the log is as it was.
    @Test func aBadEncodingStoresNothing() async throws {
        let good = LogEntry(index: 1, term: 1, namespace: "t", operation: .set(path: p("/a"), value: j("1")), timestamp: 0)
        var elsewhere = good
        elsewhere.index = 2
        var badNamespace = good
        badNamespace.namespace = "a/b"
        let cases: [EncodedEntry] = [
            EncodedEntry(index: 1, term: 1, encoded: [9, 9, 9], decoded: nil),
            EncodedEntry(index: 1, term: 1, encoded: elsewhere.encoded(), decoded: nil),
            EncodedEntry(index: 1, term: 2, encoded: good.encoded(), decoded: nil),
            EncodedEntry(index: 1, term: 1, encoded: badNamespace.encoded(), decoded: nil),
        ]
        let f = try openStore()
        for bad in cases {
            await #expect(throws: StorageError.self) { try await f.append(encoded: [bad]) }
            await #expect(throws: StorageError.self) { try await f.appendAndApply(encoded: [bad], through: 1) }
            #expect(f.lastLogIndex == 0 && f.appliedIndex == 0)
        }
        // One bad entry of a batch: none of it is stored.
        let ok = EncodedEntry(index: 1, term: 1, encoded: good.encoded(), decoded: nil)
        await #expect(throws: StorageError.self) {
            try await f.append(encoded: [ok, EncodedEntry(index: 2, term: 1, encoded: [9, 9, 9], decoded: nil)])
        }
        #expect(f.lastLogIndex == 0)
        try await f.appendAndApply(encoded: [EncodedEntry(index: 1, term: 1, encoded: good.encoded(), decoded: nil)], through: 1)
        #expect(try f.get("/a") == n("1"))
    }
}
