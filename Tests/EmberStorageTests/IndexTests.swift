import EmberCore
import Foundation
import Testing
import EmberTestSupport
@testable import EmberStorage

@Suite(.printsSeedOnFailure) struct IndexTests {
    func keys(_ r: [(key: String, node: Node)]) -> [String] { r.map(\.key) }

    func check(_ s: EmberStore, _ path: String, _ spec: QuerySpec, _ model: Node, _ note: @autoclosure () -> String = "") throws {
        let got = try s.query(namespace: "t", path: p(path), spec: spec)
        let want = spec.window(of: model.child(at: p(path)))
        #expect(keys(got) == keys(want), "\(spec) \(note())")
        #expect(got.map(\.node) == want.map(\.node), "\(spec) \(note())")
    }

    @Test func buildMaintainDrop() async throws {
        let s = try openStore()
        try await s.set("/dinos", #"{"a": {"height": 4, "d": {"h": 1}}, "b": {"height": 2}, "c": {"height": "tall"}, "e": 7}"#)
        #expect(try s.hasIndex(namespace: "t", path: p("/dinos"), index: .child(p("height"))) == false)
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/dinos", indexes: ["height", "d/h", ".value"])])
        #expect(try s.hasIndex(namespace: "t", path: p("/dinos"), index: .child(p("height"))))
        #expect(try s.hasIndex(namespace: "t", path: p("/dinos"), index: .child(p("d/h"))))
        #expect(try s.hasIndex(namespace: "t", path: p("/other"), index: .child(p("height"))) == false)
        #expect(try s.indexSpecs(namespace: "t").first?.indexes.count == 3)
        let byHeight = QuerySpec(index: .child(p("height")))
        func model() throws -> Node { try s.get("/") }
        try check(s, "/dinos", byHeight.limited(toFirst: 2), try model())
        #expect(keys(try s.query(namespace: "t", path: p("/dinos"), spec: byHeight)) == ["e", "b", "a", "c"])
        try await s.set("/dinos/b/height", "10")
        try await s.set("/dinos/z", #"{"height": 0}"#)
        try await s.set("/dinos/a", "null")
        try await s.update("/dinos", [("c/height", "1"), ("e/height", "3")])
        #expect(keys(try s.query(namespace: "t", path: p("/dinos"), spec: byHeight)) == ["z", "c", "e", "b"])
        for spec in [byHeight.starting(at: .number(1)).limited(toLast: 2), QuerySpec(index: .value).limited(toFirst: 3),
                     QuerySpec(index: .child(p("d/h"))), byHeight.equal(to: .number(3))] {
            try check(s, "/dinos", spec, try model())
        }
        try await s.set("/", #"{"dinos": {"q": {"height": 5}}}"#)
        #expect(keys(try s.query(namespace: "t", path: p("/dinos"), spec: byHeight)) == ["q"])
        try await s.setIndexes(namespace: "t", [])
        #expect(try s.hasIndex(namespace: "t", path: p("/dinos"), index: .child(p("height"))) == false)
        // Without the index the query is evaluated from the node (server answers "Index not defined").
        #expect(keys(try s.query(namespace: "t", path: p("/dinos"), spec: byHeight)) == ["q"])
        let raw = try s.withRead { t in try t.hasPrefix(s.tables.idx, []) }
        #expect(raw == false)
    }

    @Test func wildcardLocations() async throws {
        let s = try openStore()
        try await s.set("/users", #"{"u1": {"posts": {"p1": {"t": 3}, "p2": {"t": 1}}}, "u2": {"posts": {"p3": {"t": 2}}}}"#)
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/users/$uid/posts", indexes: ["t"])])
        #expect(try s.hasIndex(namespace: "t", path: p("/users/anyone/posts"), index: .child(p("t"))))
        let q = QuerySpec(index: .child(p("t")))
        #expect(keys(try s.query(namespace: "t", path: p("/users/u1/posts"), spec: q)) == ["p2", "p1"])
        try await s.set("/users/u3", #"{"posts": {"x": {"t": 0}, "y": {"t": 9}}}"#)
        try await s.set("/users/u1/posts/p2/t", "7")
        #expect(keys(try s.query(namespace: "t", path: p("/users/u3/posts"), spec: q.limited(toLast: 1))) == ["y"])
        #expect(keys(try s.query(namespace: "t", path: p("/users/u1/posts"), spec: q)) == ["p1", "p2"])
        try await s.set("/users/u1", "null")
        #expect(keys(try s.query(namespace: "t", path: p("/users/u1/posts"), spec: q)).isEmpty)
        #expect(keys(try s.query(namespace: "t", path: p("/users/u2/posts"), spec: q)) == ["p3"])
    }

    /// Randomized: indexed, key and priority queries equal `QuerySpec.window` on the full node,
    /// while the data changes underneath.
    @Test func randomQueriesMatchWindow() async throws {
        let s = try openStore()
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/items", indexes: ["h", "d/h", ".value"])])
        var g = TestSeed.generator(42)
        let long = String(repeating: "p", count: 70)
        func value() -> JSON {
            switch Int.random(in: 0..<11, using: &g) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &g))
            case 2, 3: return .int(Int64.random(in: -3...3, using: &g))
            case 4: return .double(Double(Int.random(in: -20...20, using: &g)) / 4)
            case 5: return .string(["a", "b", "ab", ""].randomElement(using: &g)!)
            case 6: return .string(long + ["a", "b", "c"].randomElement(using: &g)!)
            case 7: return .object(["x": .int(1)])
            default: return .int(Int64.random(in: 0...5, using: &g))
            }
        }
        func item() -> JSON {
            var o: KeyMap<JSON> = [:]
            if Bool.random(using: &g) { o["h"] = value() }
            if Int.random(in: 0..<3, using: &g) == 0 { o["d"] = .object(["h": value()]) }
            if Int.random(in: 0..<3, using: &g) == 0 { o[".priority"] = Bool.random(using: &g) ? .int(Int64.random(in: 0...3, using: &g)) : .string("p") }
            if o.isEmpty || Array(o.keys) == [".priority"] { return Int.random(in: 0..<4, using: &g) == 0 ? value() : .object(["z": .int(1)]) }
            return .object(o)
        }
        let keyPool = (0..<30).map { i -> String in i % 3 == 0 ? String(i) : "k\(i % 7)\(i)" } + ["-1", "007", "a"]
        func key() -> String { keyPool.randomElement(using: &g)! }
        func bound() -> IndexValue {
            IndexValue(json: value()) ?? .null
        }
        var queries = 0
        for round in 0..<25 {
            // Mutate: a few sets and an update.
            for _ in 0..<4 { try await s.submit(namespace: "t", .set(path: p("/items/\(key())"), value: item())) }
            try await s.submit(namespace: "t", .update(path: p("/items"), values: [(p("\(key())/h"), value()), (p("\(key())/d/h"), value())]
                .filter { a in true }.reduce(into: [(Path, JSON)]()) { acc, x in if !acc.contains(where: { $0.0.contains(x.0) || x.0.contains($0.0) }) { acc.append(x) } }))
            if round % 10 == 9 { try await s.set("/items/\(key())", "null") }
            let model = try s.get("/")
            for _ in 0..<40 {
                let idx: QueryIndex = [.child(p("h")), .child(p("d/h")), .value, .key, .priority].randomElement(using: &g)!
                var q = QuerySpec(index: idx)
                func name() -> String? { Int.random(in: 0..<3, using: &g) == 0 ? key() : nil }
                func kb() -> IndexValue { idx == .key ? .string(key()) : bound() }
                switch Int.random(in: 0..<6, using: &g) {
                case 0: q = q.starting(at: kb(), key: name())
                case 1: q = q.starting(after: kb(), key: name())
                case 2: q = q.ending(at: kb(), key: name())
                case 3: q = q.ending(before: kb(), key: name())
                case 4: q = q.equal(to: kb(), key: name())
                default: break
                }
                if Bool.random(using: &g) { q = q.starting(at: kb(), key: name()) }
                switch Int.random(in: 0..<3, using: &g) {
                case 0: q = q.limited(toFirst: Int.random(in: 0...6, using: &g))
                case 1: q = q.limited(toLast: Int.random(in: 0...6, using: &g))
                default: break
                }
                try check(s, "/items", q, model, "round \(round)")
                queries += 1
            }
        }
        print("random query property: \(queries) queries compared with QuerySpec.window")
    }

    /// Randomized model check: the stored tree equals `Node` semantics after every write.
    @Test func randomWritesMatchNodeModel() async throws {
        let s = try openStore()
        var model = Node.empty
        var g = TestSeed.generator(7)
        let keys = ["a", "b", "1", "2", "-5", "x y"]
        func path() -> Path { Path(validated: (0..<Int.random(in: 0...3, using: &g)).map { _ in keys.randomElement(using: &g)! }) }
        func value(_ depth: Int = 0) -> JSON {
            switch Int.random(in: 0..<(depth > 1 ? 5 : 8), using: &g) {
            case 0: return .null
            case 1: return .int(Int64.random(in: 0...3, using: &g))
            case 2: return .double(0.5)
            case 3: return .string("s")
            case 4: return .object([".value": .bool(true), ".priority": .int(2)])
            default:
                var o: KeyMap<JSON> = [:]
                for _ in 0..<Int.random(in: 0...3, using: &g) { o[keys.randomElement(using: &g)!] = value(depth + 1) }
                if Bool.random(using: &g) { o[".priority"] = .string("p") }
                return .object(o)
            }
        }
        for step in 0..<300 {
            let base = path()
            if Int.random(in: 0..<3, using: &g) == 0 {
                var parts: [(Path, JSON)] = []
                for _ in 0..<Int.random(in: 1...3, using: &g) {
                    let rel = Path(validated: (0..<Int.random(in: 1...2, using: &g)).map { _ in keys.randomElement(using: &g)! })
                    if !parts.contains(where: { $0.0.contains(rel) || rel.contains($0.0) }) { parts.append((rel, value())) }
                }
                if base.count + 2 > 4 { continue }
                _ = try await s.submit(namespace: "t", .update(path: base, values: parts))
                model = model.updating(try parts.map { (base.appending($0.0), try Node(json: $0.1)) })
            } else {
                let v = value()
                _ = try await s.submit(namespace: "t", .set(path: base, value: v))
                model = model.setting(try Node(json: v), at: base)
            }
            let stored = try s.get("/")
            #expect(stored == model, "step \(step)")
            if stored != model { break }
        }
    }
}

@Suite(.printsSeedOnFailure) struct IndexScanTests {
    @Test func limitedIndexedQueryReadsFewEntries() async throws {
        let s = try openStore()
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/big", indexes: ["score"])])
        var obj: KeyMap<JSON> = [:]
        for i in 0..<2_000 { obj["c\(i)"] = .object(["score": .int(Int64(i % 500)), "name": .string(String(repeating: "n", count: 70) + "\(i)")]) }
        try await s.submit(namespace: "t", .set(path: p("/big"), value: .object(obj)))
        let before = s.metrics.queryIndexEntriesScanned
        let q = QuerySpec(index: .child(p("score"))).starting(at: .number(250)).limited(toFirst: 3)
        let r = try s.query(namespace: "t", path: p("/big"), spec: q)
        #expect(r.map(\.key) == ["c1250", "c1750", "c250"])
        let last = try s.query(namespace: "t", path: p("/big"), spec: QuerySpec(index: .child(p("score"))).limited(toLast: 2))
        #expect(last.map(\.key) == ["c499", "c999"])
        let scanned = s.metrics.queryIndexEntriesScanned - before
        print("indexed queries over 2,000 children scanned \(scanned) index entries")
        #expect(scanned <= 8)
        // Long strings share a truncated key prefix; order is still exact.
        try await s.setIndexes(namespace: "t", [try IndexSpec(location: "/big", indexes: ["name"])])
        let byName = QuerySpec(index: .child(p("name"))).limited(toFirst: 3)
        let want = byName.window(of: try s.get("/big")).map(\.key)
        #expect(try s.query(namespace: "t", path: p("/big"), spec: byName).map(\.key) == want)
        #expect(try s.query(namespace: "t", path: p("/big"), spec: byName.limited(toLast: 3)).map(\.key)
            == byName.limited(toLast: 3).window(of: try s.get("/big")).map(\.key))
    }
}
