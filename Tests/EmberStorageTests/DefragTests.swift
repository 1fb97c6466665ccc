import EmberCore
import Foundation
import Synchronization
import Testing
@testable import EmberStorage

/// Online defrag (issue 41) on real LMDB files: the store keeps serving while its data file is
/// rewritten and replaced.
@Suite struct DefragTests {
    /// 4,000 indexed children, then 3,000 of them deleted: a file mostly of free pages.
    func fillAndThin(_ s: EmberStore) async throws {
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["score"])])
        var parts: [(Path, JSON)] = []
        for i in 0..<4_000 {
            parts.append((p(String(format: "/c%05d", i)), .object(["score": .int(Int64((i * 7919) % 4_000)), "name": .string("item \(i)")])))
        }
        _ = try await s.submit(namespace: "t", .update(path: p("/items"), values: parts))
        let gone = (0..<3_000).map { (p(String(format: "/c%05d", $0)), JSON.null) }
        _ = try await s.submit(namespace: "t", .update(path: p("/items"), values: gone))
    }

    func fileBytes(_ dir: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: dir + "/data.mdb")[.size] as? Int) ?? 0
    }

    @Test func defragShrinksTheFileAndKeepsTheState() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir)
        try await fillAndThin(s)
        let hash = try s.stateHash()
        let before = fileBytes(dir)
        let r = try await s.defrag()
        #expect(r.bytesBefore == before)
        #expect(r.bytesAfter == fileBytes(dir))
        #expect(r.bytesAfter < before * 6 / 10, "\(before) → \(r.bytesAfter)")
        #expect(try s.stateHash() == hash)
        #expect(s.lastDefrag == r)
        // The store goes on writing to the new file, and a restart opens it.
        try await s.set("/items/new", #"{"score": 1}"#)
        let query = try s.query(namespace: "t", path: p("/items"), spec: QuerySpec(index: .child(p("score")), limit: 3))
        #expect(query.count == 3)
        let after = try s.stateHash()
        s.close()
        #expect(!FileManager.default.fileExists(atPath: dir + "/" + Defrag.linkName(1)))
        let s2 = try openStore(dir)
        defer { s2.close() }
        #expect(try s2.stateHash() == after)
        #expect(try s2.get("/items/new") == n(#"{"score": 1}"#))
    }

    /// Writes made while the copy is behind reach the new file (caught up in the pause), every
    /// commit is published once, and a second defrag (the other link slot) works too.
    @Test func writesDuringTheCopyAreCaughtUp() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir)
        defer { s.close() }
        try await fillAndThin(s)
        let reached = DispatchSemaphore(value: 0), resume = DispatchSemaphore(value: 0)
        s.core.afterDefragCopy.withLock { $0 = { reached.signal(); resume.wait() } }
        let published = Mutex<[UInt64]>([])
        s.onCommit { rs in published.withLock { $0 += rs.map(\.index) } }
        let running = Task { try await s.defrag() }
        await Task.detached { reached.wait() }.value
        var acknowledged: [UInt64] = []
        for i in 0..<200 {
            acknowledged.append(try await s.set("/items/c\(String(format: "%05d", 3_000 + i))/score", "\(100_000 + i)").index)
        }
        try await s.set("/items/c00001", #"{"score": 5}"#)  // deleted before the copy, written again
        try await s.update("/items", [("c03999", "null")])    // deleted after it
        resume.signal()
        let r = try await running.value
        s.core.afterDefragCopy.withLock { $0 = nil }
        #expect(r.pauseKeys > 0 && r.rounds == 0)
        for (i, _) in acknowledged.enumerated() {
            #expect(try s.get("/items/c\(String(format: "%05d", 3_000 + i))/score") == n("\(100_000 + i)"))
        }
        #expect(try s.get("/items/c00001") == n(#"{"score": 5}"#))
        #expect(try s.get("/items/c03999") == .empty)
        let top = try s.query(namespace: "t", path: p("/items"), spec: QuerySpec(index: .child(p("score")), limit: 1, limitFromStart: false))
        #expect(top.map(\.key) == ["c03199"])
        let seen = published.withLock { $0 }
        #expect(seen == Array(seen.first!...seen.last!), "each commit published once, in order")
        let hash = try s.stateHash()
        try await s.defrag()
        try await s.defrag()
        #expect(try s.stateHash() == hash)
    }

    /// A read that began on the old environment finishes on it after the switch.
    @Test func aReadOnTheOldEnvironmentOutlivesTheSwitch() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir)
        defer { s.close() }
        try await fillAndThin(s)
        let inRead = DispatchSemaphore(value: 0), switched = DispatchSemaphore(value: 0)
        let seen = Mutex<Node?>(nil)
        let reader = Thread {
            try? s.core.withRead { t in
                inRead.signal()
                switched.wait()
                seen.withLock { $0 = try? s.tables.readNode(t, key: Tables.treeKey("t", p("/items/c03500"))) }
            }
        }
        reader.start()
        await Task.detached { inRead.wait() }.value
        try await s.defrag()
        try await s.set("/items/c03500/name", #""changed""#)
        switched.signal()
        while seen.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(5)) }
        #expect(seen.withLock { $0 }?.child("name") == n(#""item 3500""#))
        #expect(try s.get("/items/c03500/name") == n(#""changed""#))
    }

    /// A defrag cut short leaves its copy and a link; opening the store removes them.
    @Test func leftoversAreRemovedWhenTheStoreOpens() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let s = try openStore(dir)
            try await s.set("/a", "1")
            s.close()
        }
        try FileManager.default.createDirectory(atPath: dir + "/" + Defrag.workName, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/" + Defrag.workName + "/data.mdb", contents: Data(repeating: 7, count: 4096))
        #expect(symlink("data.mdb", dir + "/" + Defrag.linkName(0)) == 0)
        let s = try openStore(dir)
        defer { s.close() }
        #expect(try s.get("/a") == n("1"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/" + Defrag.workName))
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + Defrag.linkName(0))) == nil)
    }

    /// A snapshot installed while the copy is behind cannot be caught up by keys: the defrag
    /// gives up and leaves everything as it was.
    @Test func aSnapshotInstallDuringTheCopyMakesItGiveUp() async throws {
        let dir = tempDir(), other = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir); try? FileManager.default.removeItem(atPath: other) }
        let s = try openStore(dir)
        defer { s.close() }
        try await fillAndThin(s)
        let src = try openStore(other)
        try await src.set("/x", "42")
        var chunks: [[UInt8]] = []
        try src.snapshot { chunks.append($0) }
        src.close()
        let reached = DispatchSemaphore(value: 0), resume = DispatchSemaphore(value: 0)
        s.core.afterDefragCopy.withLock { $0 = { reached.signal(); resume.wait() } }
        let running = Task { try await s.defrag() }
        await Task.detached { reached.wait() }.value
        try await s.installSnapshot(chunks: chunks)
        resume.signal()
        await #expect(throws: DefragError.self) { try await running.value }
        #expect(!FileManager.default.fileExists(atPath: dir + "/" + Defrag.workName))
        #expect(try s.get("/x") == n("42"))
        s.core.afterDefragCopy.withLock { $0 = nil }
        try await s.defrag()  // and the next one works
        #expect(try s.get("/x") == n("42"))
    }
}
