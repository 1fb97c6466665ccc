import EmberCore
import EmberTestSupport
import Testing
@testable import EmberStorage

/// A single node without a log counts its entries instead of encoding them
/// (`LogEntry.encodedSize`, `EmberStore.keepsLog`): the count is the encoding's size, and the
/// size limit and the writes come out the same with and without the log.
@Suite(.printsSeedOnFailure) struct EncodedSizeTests {
    static func randomJSON(_ g: inout SplitMix64, depth: Int = 0) -> JSON {
        // Wide containers (counts past one varint byte) only at the top: the value stays small.
        let wide = depth == 0
        switch Int.random(in: 0..<(depth > 2 ? 6 : 9), using: &g) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2: return .int(Int64.random(in: .min ... .max, using: &g))
        case 3: return .double(Double(Int.random(in: -999...999, using: &g)) / 8)
        case 4: return .string(["", "a", "é😀", String(repeating: "x", count: 127), String(repeating: "y", count: 128),
                                String(repeating: "z", count: wide ? 20_000 : 300)].randomElement(using: &g)!)
        case 5: return .string("s\(Int.random(in: 0..<1000, using: &g))")
        case 6: return .array((0..<[0, 1, 3, wide ? 130 : 2].randomElement(using: &g)!).map { _ in randomJSON(&g, depth: depth + 1) })
        default:
            var o: KeyMap<JSON> = [:]
            for i in 0..<[0, 2, 5, wide ? 140 : 3].randomElement(using: &g)! { o["k\(i)é"] = randomJSON(&g, depth: depth + 1) }
            return .object(o)
        }
    }

    @Test func theCountIsTheEncodingsSize() throws {
        var g = TestSeed.generator(0x5EED_4201)
        for round in 0..<1_500 {
            let path = try Path((0..<Int.random(in: 0...3, using: &g)).map { "p\($0)é" }.joined(separator: "/"))
            let condition: WriteCondition? = [nil, .ifVersion(UInt64.random(in: 0...UInt64.max, using: &g)), .ifHash("h\(round)"),
                                              .ifDataVersion(nil), .ifDataVersion(UInt64(round))].randomElement(using: &g)!
            let operation: WriteOperation
            switch Int.random(in: 0..<4, using: &g) {
            case 0: operation = .set(path: path, value: Self.randomJSON(&g), condition: condition)
            case 1:
                let n = [1, 3, 200].randomElement(using: &g)!
                operation = .update(path: path, values: (0..<n).map { (try! Path("c\($0)/d"), Self.randomJSON(&g, depth: 1)) }, condition: condition)
            case 2: operation = .noop
            default: operation = .setRules(text: String(repeating: "r", count: Int.random(in: 0...300, using: &g)))
            }
            let auth: WriteAuth = [.admin, .user(nil), .user(Self.randomJSON(&g, depth: 2))].randomElement(using: &g)!
            let writer: WriterStamp? = Bool.random(using: &g) ? WriterStamp(writer: "w\(round)", seq: UInt64(round)) : nil
            let e = LogEntry(index: UInt64(round), term: 3, namespace: ["t", String(repeating: "n", count: 64)].randomElement(using: &g)!,
                             operation: operation, timestamp: Int64(round), auth: auth, writer: writer)
            #expect(e.encodedSize() == e.encoded().count, "round \(round)")
        }
    }

    /// Without a log (a single node's default) the entry is never encoded: the size limit still
    /// holds at the same size, and the data written is the same as with a log.
    @Test func aStoreWithoutALogRefusesAndWritesAsOneWithALog() async throws {
        var options = smallOptions()
        var big = options
        options.logRetention = StoreOptions.singleNodeLogRetention
        options.maxEntryBytes = 4096
        big.maxEntryBytes = 4096
        let bare = try openStore(tempDir(), options), logged = try openStore(tempDir(), big)
        defer { bare.close(); logged.close() }
        #expect(!bare.keepsLog && logged.keepsLog)
        var g = TestSeed.generator(0x5EED_4202)
        for round in 0..<60 {
            let parts = (0..<Int.random(in: 1...40, using: &g)).map { (try! Path("u\($0)"), Self.randomJSON(&g, depth: 2)) }
            let op = WriteOperation.update(path: try Path("d"), values: parts, condition: nil)
            let size = LogEntry(index: 0, term: 0, namespace: "t", operation: op, timestamp: 0).encodedSize()
            func outcome(_ store: EmberStore) async -> Result<WriteResult, any Error> {
                do { return .success(try await store.submit(namespace: "t", op)) } catch { return .failure(error) }
            }
            let a = await outcome(bare), b = await outcome(logged)
            switch (a, b) {
            case (.success, .success): #expect(size <= 4096, "round \(round)")
            case (.failure(let x), .failure(let y)):
                #expect("\(x)" == "\(y)", "round \(round)")
                #expect(size > 4096, "round \(round): \(x)")
            default: Issue.record("round \(round): without a log \(a), with one \(b)")
            }
        }
        #expect(try bare.get("d") == logged.get("d"))
    }
}
