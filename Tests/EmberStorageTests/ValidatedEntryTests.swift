import EmberCore
import EmberTestSupport
import Testing
@testable import EmberStorage

/// A cluster node checks a client write without building its nodes (`validatedEntry`): it
/// accepts and refuses exactly what the building check (`prepare`, a single node's submit) does
/// and encodes the same entry. The error is the same but for a value with several problems,
/// where either check may name a different one of them (both refuse it).
@Suite(.printsSeedOnFailure) struct ValidatedEntryTests {
    static func randomJSON(_ g: inout SplitMix64, depth: Int) -> JSON {
        switch Int.random(in: 0..<(depth > 34 ? 6 : 10), using: &g) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2: return .int(Int64.random(in: -9...9, using: &g))
        case 3: return .double([1.5, .infinity, .nan].randomElement(using: &g)!)
        case 4: return .string(Int.random(in: 0..<200, using: &g) == 0 ? String(repeating: "s", count: Limits.maxStringBytes + 1) : "s")
        case 5: return Int.random(in: 0..<3, using: &g) == 0 ? .object([".sv": .string("timestamp")]) : .string("")
        case 6: return .array((0..<Int.random(in: 0...3, using: &g)).map { _ in randomJSON(&g, depth: depth + 1) })
        default:
            var o: KeyMap<JSON> = [:]
            for _ in 0..<Int.random(in: 0...3, using: &g) {
                let key = ["a", "b", "0", "x.y", "$k", "", ".value", "ok", "k[1]"].randomElement(using: &g)!
                o[key] = randomJSON(&g, depth: depth + 1)
            }
            if Int.random(in: 0..<5, using: &g) == 0 { o[".priority"] = [.int(1), .string("p"), .bool(true)].randomElement(using: &g)! }
            return .object(o)
        }
    }

    @Test func checkingWithoutNodesAgreesWithBuildingThem() throws {
        let store = try openStore()
        defer { store.close() }
        var g = TestSeed.generator(0x5EED_42)
        var refused = 0, accepted = 0, sameError = 0
        for round in 0..<3_000 {
            let base = try Path((0..<Int.random(in: 0...3, using: &g)).map { _ in "p\(Int.random(in: 0...2, using: &g))" }.joined(separator: "/"))
            let operation: WriteOperation
            if Bool.random(using: &g) {
                operation = .set(path: base, value: Self.randomJSON(&g, depth: base.count), condition: nil)
            } else {
                let parts = (0..<Int.random(in: 1...4, using: &g)).map { _ in
                    (try! Path(["a", "b", "c/d", "c"].randomElement(using: &g)!), Self.randomJSON(&g, depth: base.count + 1))
                }
                operation = .update(path: base, values: parts, condition: nil)
            }
            let fast = Result { try store.validatedEntry(namespace: "t", operation: operation, auth: .admin, writer: nil) }
            let built = Result { try store.prepare(namespace: "t", operation: operation, buildNodes: true, encode: true).encoded! }
            switch (fast, built) {
            case (.success(let a), .success(let b)):
                #expect(a == b, "round \(round)")
                accepted += 1
            case (.failure(let a), .failure(let b)):
                if "\(a)" == "\(b)" { sameError += 1 }
                refused += 1
            default:
                Issue.record("round \(round): without nodes \(fast), building \(built)")
            }
        }
        #expect(refused > 300 && accepted > 300)
        #expect(sameError * 10 >= refused * 9, "the same error for most refusals: \(sameError) of \(refused)")
    }

    /// A cluster leader appends its own client's write from the entry `validatedLogEntry`
    /// returns instead of decoding the bytes: it must be exactly what decoding them gives, for
    /// every kind of operation, condition, auth and writer stamp.
    @Test func theEntryItReturnsIsWhatItsEncodingDecodesTo() throws {
        let store = try openStore()
        defer { store.close() }
        var g = TestSeed.generator(0x5EED_43)
        var checked = 0
        for round in 0..<2_000 {
            let base = try Path((0..<Int.random(in: 0...3, using: &g)).map { _ in "p\(Int.random(in: 0...2, using: &g))" }.joined(separator: "/"))
            let condition: WriteCondition? = [nil, .ifVersion(UInt64.random(in: 0...9, using: &g)), .ifHash("h"),
                                              .ifDataVersion(nil), .ifDataVersion(7)].randomElement(using: &g)!
            let operation: WriteOperation
            switch Int.random(in: 0..<4, using: &g) {
            case 0: operation = .set(path: base, value: Self.randomJSON(&g, depth: base.count), condition: condition)
            case 1: operation = .setRules(text: #"{"rules": {".read": true}}"#)
            default:
                let parts = (0..<Int.random(in: 1...4, using: &g)).map { _ in
                    (try! Path(["a", "b", "c/d", "e"].randomElement(using: &g)!), Self.randomJSON(&g, depth: base.count + 1))
                }
                operation = .update(path: base, values: parts, condition: condition)
            }
            let auth: WriteAuth = [.admin, .user(nil), .user(.object(["uid": .string("u\(round)"), "n": .double(1.0)]))].randomElement(using: &g)!
            let writer: WriterStamp? = Bool.random(using: &g) ? WriterStamp(writer: "w\(round % 3)", seq: UInt64(round)) : nil
            guard let checkedEntry = try? store.validatedLogEntry(namespace: "t", operation: operation, auth: auth, writer: writer) else {
                continue
            }
            let (encoded, entry) = checkedEntry
            #expect(try LogEntry(decoding: encoded) == entry, "round \(round)")
            #expect(entry.index == 0 && entry.term == 0 && entry.timestamp == 0)
            checked += 1
        }
        #expect(checked > 500)
    }
}
