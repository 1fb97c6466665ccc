import EmberCore
import EmberTestSupport
import Foundation
import Testing
@testable import EmberStorage

/// A streamed read (`TreeStream`) writes exactly the bytes of the whole read serialized, for
/// plain, export, pretty and shallow answers, whatever the chunk size; from the snapshot it
/// opened on; and lets its transaction go when closed or when the store closes.
@Suite(.printsSeedOnFailure) struct TreeStreamTests {
    /// Keys that make arrays (small indices), the integer group, priorities' neighbours in key
    /// order (`-`, `.`-adjacent), long keys (the overflow table), plain names, keys JSON escapes
    /// (`"`, `\`) and keys whose stored text-order bytes differ from their UTF-8 (U+E000–U+FFFF
    /// next to U+10000…: keys are written from their stored bytes).
    static let keys = ["0", "1", "2", "3", "5", "7", "10", "-1", "007", "a", "b", "-x", "-Nabc", "z", "é",
                       String(repeating: "k", count: 300), "prio", "ab", "q\"\\k", "\u{E000}k", "\u{FFFD}", "😀k"]

    static func randomValue(_ g: inout SplitMix64, depth: Int) -> JSON {
        func leaf() -> JSON {
            switch Int.random(in: 0..<6, using: &g) {
            case 0: return .int(Int64.random(in: -300...300, using: &g))
            case 1: return .double(Double(Int.random(in: -9...9, using: &g)) / 4)
            case 2: return .string(["", "s", "q\"uote\n", "é😀", "back\\slash\u{7F}\u{1}"].randomElement(using: &g)!)
            case 3: return .bool(Bool.random(using: &g))
            case 4: return .object([".value": .int(Int64.random(in: 0...3, using: &g)), ".priority": .double(1.5)])
            default: return .object([".value": .string("v"), ".priority": .string("p")])
            }
        }
        if depth >= 4 || Int.random(in: 0..<4, using: &g) == 0 { return leaf() }
        var o: KeyMap<JSON> = [:]
        // Arrays: a run of small indices; otherwise any keys.
        if Int.random(in: 0..<3, using: &g) == 0 {
            for i in 0..<Int.random(in: 1...6, using: &g) where Int.random(in: 0..<4, using: &g) > 0 {
                o[String(i)] = randomValue(&g, depth: depth + 1)
            }
        } else {
            for _ in 0..<Int.random(in: 1...6, using: &g) { o[keys.randomElement(using: &g)!] = randomValue(&g, depth: depth + 1) }
        }
        if Int.random(in: 0..<3, using: &g) == 0 { o[".priority"] = Bool.random(using: &g) ? .int(3) : .string("p") }
        return .object(o)
    }

    /// Every byte of a stream, pulled `chunk` bytes at a time.
    static func drain(_ s: TreeStream, chunk: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        var steps = 0
        while !s.isFinished {
            let c = try s.next(maxBytes: chunk)
            out += c
            steps += 1
            #expect(steps < 1_000_000)
        }
        return out
    }

    static func whole(_ s: EmberStore, _ path: Path, _ f: TreeJSONFormat) throws -> [UInt8] {
        let node = try s.read(namespace: "t", path: path).node
        if f.shallow {
            // The REST front's shallow answer of a whole read.
            guard node.hasChildren else { return node.toJSON().serializedBytes(pretty: f.pretty) }
            var o: KeyMap<JSON> = [:]
            for k in node.children.keys { o[k] = .bool(true) }
            return JSON.object(o).serializedBytes(pretty: f.pretty)
        }
        return (f.export ? node.exportJSON() : node.toJSON()).serializedBytes(pretty: f.pretty)
    }

    @Test func streamedBytesEqualTheWholeReadForRandomTrees() async throws {
        var g = TestSeed.generator(0x57EA_0001)
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir)
        defer { s.close() }
        let formats = [TreeJSONFormat(), TreeJSONFormat(export: true), TreeJSONFormat(pretty: true),
                       TreeJSONFormat(export: true, pretty: true), TreeJSONFormat(shallow: true),
                       TreeJSONFormat(pretty: true, shallow: true)]
        for round in 0..<60 {
            // Whole values, then writes inside them (per-leaf records next to inline objects).
            _ = try await s.submit(namespace: "t", .set(path: .root, value: Self.randomValue(&g, depth: 0)))
            for _ in 0..<Int.random(in: 0...6, using: &g) {
                let path = Path(validated: (0..<Int.random(in: 1...3, using: &g)).map { _ in Self.keys.randomElement(using: &g)! })
                _ = try await s.submit(namespace: "t", .set(path: path, value: Self.randomValue(&g, depth: path.count)))
            }
            var paths: [Path] = [.root, Path(validated: ["nothing"])]
            if case .object(let o) = try s.get("/").exportJSON() {
                for (k, v) in o where !k.hasPrefix(".") {
                    paths.append(Path(validated: [k]))
                    if case .object(let o2) = v { for k2 in o2.keys where !k2.hasPrefix(".") { paths.append(Path(validated: [k, k2])) } }
                }
            }
            for path in paths {
                for f in formats {
                    let expected = try Self.whole(s, path, f)
                    let chunk = [1, 7, 64, 1 << 20].randomElement(using: &g)!
                    let got = try Self.drain(try s.openTreeStream(namespace: "t", path: path, format: f), chunk: chunk)
                    #expect(got == expected, "round \(round) \(path) \(f) chunk \(chunk): \(String(decoding: got, as: UTF8.self)) != \(String(decoding: expected, as: UTF8.self))")
                }
            }
        }
        #expect(s.openTreeStreams == 0)
    }

    /// A streamed query writes exactly the whole query's answer (its children as a node) for key,
    /// indexed child and value, unindexed and priority queries with random bounds and limits.
    @Test func streamedQueriesEqualTheWholeQuery() async throws {
        var g = TestSeed.generator(0x57EA_0002)
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir)
        defer { s.close() }
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["n", ".value"])])
        let indexes: [QueryIndex] = [.key, .child(Path(validated: ["n"])), .value, .priority, .child(Path(validated: ["m"]))]
        func bound(_ index: QueryIndex) -> QueryBound {
            let name: String? = Bool.random(using: &g) ? nil : Self.keys.randomElement(using: &g)!
            switch index {
            case .key: return QueryBound(value: .string(Self.keys.randomElement(using: &g)!), inclusive: Bool.random(using: &g))
            default: return QueryBound(value: Bool.random(using: &g) ? .number(Double(Int.random(in: -3...3, using: &g))) : .string("p"), name: name)
            }
        }
        let formats = [TreeJSONFormat(), TreeJSONFormat(export: true), TreeJSONFormat(pretty: true)]
        for round in 0..<40 {
            // Children that are leaves, objects with n, inline objects and arrays' indices.
            var kids: KeyMap<JSON> = [:]
            for k in Self.keys where Int.random(in: 0..<3, using: &g) > 0 {
                kids[k] = Bool.random(using: &g) ? .object(["n": .int(Int64.random(in: -3...3, using: &g)), "x": Self.randomValue(&g, depth: 2)])
                    : Self.randomValue(&g, depth: 1)
            }
            _ = try await s.submit(namespace: "t", .set(path: p("/items"), value: .object(kids)))
            for _ in 0..<8 {
                let index = indexes.randomElement(using: &g)!
                var spec = QuerySpec(index: index)
                if Bool.random(using: &g) { spec.start = bound(index) }
                if Bool.random(using: &g) { spec.end = bound(index) }
                if Bool.random(using: &g) { spec.limit = Int.random(in: 0...8, using: &g); spec.limitFromStart = Bool.random(using: &g) }
                var window: KeyMap<Node> = [:]
                for (k, n) in try s.query(namespace: "t", path: p("/items"), spec: spec) { window[k] = n }
                let node = Node(children: window)
                for f in formats {
                    let expected = (f.export ? node.exportJSON() : node.toJSON()).serializedBytes(pretty: f.pretty)
                    let chunk = [1, 64, 1 << 20].randomElement(using: &g)!
                    let got = try Self.drain(try s.openTreeStream(namespace: "t", path: p("/items"), format: f, query: spec), chunk: chunk)
                    #expect(got == expected, "round \(round) \(spec) \(f): \(String(decoding: got, as: UTF8.self)) != \(String(decoding: expected, as: UTF8.self))")
                }
            }
        }
        #expect(s.openTreeStreams == 0)
    }

    @Test func aStreamReadsTheSnapshotItOpenedOnWhileWritesGoOnBelow() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir)
        defer { s.close() }
        var kids: KeyMap<JSON> = [:]
        for i in 0..<2_000 { kids[String(format: "c%05d", i)] = .object(["n": .int(Int64(i)), "s": .string("x")]) }
        _ = try await s.submit(namespace: "t", .set(path: p("/big"), value: .object(kids)))
        let expected = try Self.whole(s, p("/big"), TreeJSONFormat())
        let stream = try s.openTreeStream(namespace: "t", path: p("/big"), format: TreeJSONFormat())
        var got = try stream.next(maxBytes: 1_000)
        // Writes below the location after it opened: changed, added and deleted children.
        for i in 0..<200 {
            _ = try await s.submit(namespace: "t", .set(path: p("/big/c\(String(format: "%05d", i * 7))/n"), value: .int(-1)))
            _ = try await s.submit(namespace: "t", .set(path: p("/big/new\(i)"), value: .int(1)))
            _ = try await s.submit(namespace: "t", .set(path: p("/big/c\(String(format: "%05d", 1_999 - i))"), value: .null))
        }
        got += try Self.drain(stream, chunk: 4_096)
        #expect(got == expected)
        #expect(try Self.whole(s, p("/big"), TreeJSONFormat()) != expected)
        #expect(stream.version < (try s.version(namespace: "t", path: p("/big"))))
    }

    @Test func closedStreamsLetGoAndTheStoreClosesOpenOnes() async throws {
        var o = smallOptions()
        o.maxTreeStreams = 2
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try openStore(dir, o)
        var kids: KeyMap<JSON> = [:]
        for i in 0..<500 { kids["k\(i)"] = .string(String(repeating: "v", count: 50)) }
        _ = try await s.submit(namespace: "t", .set(path: p("/a"), value: .object(kids)))
        let a = try s.openTreeStream(namespace: "t", path: p("/a"), format: TreeJSONFormat())
        let b = try s.openTreeStream(namespace: "t", path: p("/a"), format: TreeJSONFormat())
        #expect(throws: StorageError.tooManyStreams(limit: 2)) { try s.openTreeStream(namespace: "t", path: p("/a"), format: TreeJSONFormat()) }
        _ = try a.next(maxBytes: 100)
        a.close()
        #expect(throws: StorageError.closed) { try a.next(maxBytes: 100) }
        #expect(s.openTreeStreams == 1)
        // A small answer finishes (and lets go) as it opens.
        let small = try s.openTreeStream(namespace: "t", path: p("/a/k1"), format: TreeJSONFormat())
        #expect(s.openTreeStreams == 1)
        #expect(try small.next(maxBytes: 10) == Array(#""\#(String(repeating: "v", count: 50))""#.utf8))
        #expect(small.isFinished)
        _ = try b.next(maxBytes: 100)
        s.close()
        #expect(throws: StorageError.closed) { try b.next(maxBytes: 100) }
    }
}
