import EmberCore
import Foundation
import Testing
@testable import EmberStorage

@Suite struct BigTests {
    /// Reopen time with ~1M leaves. Slow to build in a debug build, so only with EMBER_BIG=1.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["EMBER_BIG"] == "1"))
    func reopenMillionLeaves() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var o = smallOptions()
        o.mapSize = 8 << 30
        o.durable = false
        let t0 = Date()
        do {
            let s = try openStore(dir, o)
            for c in 0..<100 {
                var obj: KeyMap<JSON> = [:]
                for a in 0..<100 {
                    var inner: KeyMap<JSON> = [:]
                    for b in 0..<100 { inner[String(b)] = .int(Int64(c * 10_000 + a * 100 + b)) }
                    obj["a\(a)"] = .object(inner)
                }
                _ = try await s.submit(namespace: "t", .set(path: p("/big/c\(c)"), value: .object(obj)))
            }
            s.close()
        }
        let built = Date().timeIntervalSince(t0)
        let t1 = Date()
        let s = try openStore(dir, o)
        let openMs = Date().timeIntervalSince(t1) * 1000
        let t2 = Date()
        let leaf = try s.get("/big/c57/a3/42")
        let keys = try s.shallowKeys(namespace: "t", path: p("/big"))
        let readMs = Date().timeIntervalSince(t2) * 1000
        print("1,000,000 leaves: built in \(Int(built)) s; reopen \(String(format: "%.2f", openMs)) ms; point read + 100 shallow keys \(String(format: "%.2f", readMs)) ms")
        #expect(leaf == Node(.int(570_342)))
        #expect(keys.count == 100)
        #expect(openMs < 1000)
    }

    @Test func longAndOddKeys() async throws {
        let s = try openStore()
        let zeros = String(repeating: "0", count: 300) + "7"   // integer group, 301 bytes
        try await s.set("/z/\(zeros)", "1")
        try await s.set("/z/7", "2")
        try await s.set("/z/-0", "3")
        #expect(try s.shallowKeys(namespace: "t", path: p("/z")) == ["-0", "7", zeros])
        #expect(try s.get("/z/\(zeros)") == n("1"))
        // Reads and queries of absent long (overflow) paths are empty.
        let deep = "/" + (0..<6).map { _ in String(repeating: "d", count: 100) }.joined(separator: "/")
        #expect(try s.get(deep).isEmpty)
        #expect(try s.shallowKeys(namespace: "t", path: p(deep)).isEmpty)
        #expect(try s.query(namespace: "t", path: p(deep), spec: QuerySpec(index: .key).limited(toLast: 2)).isEmpty)
        #expect(try s.ver(deep) == 0)
    }
}

/// Shallow key pages (`after:`), as the console pages a long child list: every key once, in
/// Firebase key order, long (split-table) keys included.
@Test func shallowKeyPagesVisitEveryKeyOnceInOrder() async throws {
    let dir = tempDir()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let s = try openStore(dir)
    defer { s.close() }
    let long = String(repeating: "q", count: 700)
    var kids: KeyMap<JSON> = [long: .int(1)]
    for i in 0..<250 { kids["k\(i)"] = .int(Int64(i)); kids["\(i * 7)"] = .object(["x": .int(Int64(i))]) }
    _ = try await s.submit(namespace: "t", .set(path: p("/pg"), value: .object(kids)))
    let all = try s.shallowKeys(namespace: "t", path: p("/pg"))
    #expect(all.count == kids.count)
    #expect(all == kids.keys.sorted { KeyOrder.compare($0, $1) < 0 })
    var paged: [String] = []
    var after: String? = nil
    while true {
        let page = try s.shallowKeys(namespace: "t", path: p("/pg"), after: after, limit: 37)
        paged += page
        guard page.count == 37 else { break }
        after = page.last
    }
    #expect(paged == all)
    #expect(try s.shallowKeys(namespace: "t", path: p("/pg"), after: long, limit: 10).isEmpty)
}
