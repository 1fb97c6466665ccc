import EmberCore
import Foundation
import Testing

@testable import EmberStorage

/// The writer thread's own write counters (`EmberStore.writerThreadIO`: what `ember-bench pitr`
/// divides by the commits to show the pages a commit writes) and the log tables' shapes.
@Suite struct WriterIOTests {
    @Test func parsesTheKernelsCounters() {
        let text = "rchar: 10\nwchar: 8192\nsyscr: 3\nsyscw: 2\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n"
        let io = ThreadIO(procText: text)
        #expect(io?.bytesHandedToWrites == 8192 && io?.writeCalls == 2 && io?.storageBytes == 4096)
        #expect(ThreadIO(procText: "rchar: 10\n") == nil)
    }

    #if os(Linux)
    /// A durable commit writes its dirty pages and the meta page from the writer thread: each
    /// write adds at least a page and two write calls to that thread's counters, and nothing
    /// else of the process's writes (a file written here, on the test's thread) shows there.
    @Test func countsWhatTheWriterThreadWrites() async throws {
        let dir = tempDir()
        let store = try openStore(dir)
        defer { store.close() }
        let before = try #require(store.writerThreadIO())
        let page = UInt64(sysconf(Int32(_SC_PAGESIZE)))
        for i in 0..<3 { try await store.set("/a/k\(i)", #""\#(String(repeating: "v", count: 100))""#) }
        let after = try #require(store.writerThreadIO())
        #expect(after.bytesHandedToWrites >= before.bytesHandedToWrites + 3 * page, "\(before) → \(after)")
        #expect(after.writeCalls >= before.writeCalls + 6, "\(before) → \(after)")
        try Data(repeating: 1, count: 1 << 20).write(to: URL(fileURLWithPath: dir + "/other"))
        #expect(try #require(store.writerThreadIO()) == after)
    }
    #endif

    /// The log tables holding rows, with their rows and B-tree shape: none for a single node
    /// that keeps no log; an archiving node's rows all counted, in at most two tables.
    @Test func showsTheLogTablesShape() async throws {
        var single = smallOptions()
        single.logRetention = StoreOptions.singleNodeLogRetention
        let plain = try openStore(tempDir(), single)
        defer { plain.close() }
        try await plain.set("/a", "1")
        #expect(try plain.logTableShapes().isEmpty)

        var o = single
        o.archiveHold = 1_000_000
        o.alternatingLog = true
        let store = try openStore(tempDir(), o)
        defer { store.close() }
        for i in 0..<300 { try await store.set("/b/k\(i)", #""\#(String(repeating: "v", count: 100))""#) }
        let shapes = try store.logTableShapes()
        #expect(shapes.reduce(0) { $0 + $1.rows } == 300, "\(shapes)")
        #expect(!shapes.isEmpty && shapes.allSatisfy { $0.depth >= 1 && $0.leafPages >= 1 }, "\(shapes)")
        // 300 rows of ~150 bytes do not fit one page: the newest table has a root above its leaves.
        #expect(shapes.last.map { $0.depth >= 2 && $0.branchPages >= 1 } == true, "\(shapes)")
    }
}
