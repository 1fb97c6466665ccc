import EmberCore
import Testing

@testable import EmberNodeStore
@testable import EmberServer

/// REST ETags are the front's: made of the version the store returns, and an `if-match` read
/// back as the version a write expects, judged by a real LMDB store when applied.
@Suite struct ETagTests {
    @Test func ifMatchTextBecomesTheVersionItNames() {
        #expect(ETag.of(node: Node(.int(1)), version: 7) == "v7" && ETag.of(node: Node(), version: 7) == ETag.null)
        #expect(ETag.condition(ifMatch: "null_etag") == .dataVersion(nil))
        #expect(ETag.condition(ifMatch: "v7") == .dataVersion(7))
        // Not an ETag of ours: a version no data has, so the write fails with the current ETag.
        for text in ["v007", "v", "7", "V7", "v+7", "garbage", ""] {
            #expect(ETag.condition(ifMatch: text) == .dataVersion(.max), "\(text)")
        }
    }

    @Test func aWriteHoldsOnlyAgainstTheCurrentETag() async throws {
        let (node, _) = try OperationsTests.makeNode()
        defer { node.ports.close() }
        let path = try Path("/e")
        func put(_ value: Int64, ifMatch: String) async throws -> WriteOutcome {
            try await node.ports.writer.write(WriteRequest(namespace: "t", path: path, kind: .set(.int(value)),
                                                           condition: ETag.condition(ifMatch: ifMatch), identity: .admin))
        }
        #expect(try await put(1, ifMatch: "v0").applied == false)
        let first = try await put(1, ifMatch: ETag.null)
        #expect(first.applied)
        let etag = ETag.of(node: first.value, version: first.version)
        let stale = try await put(2, ifMatch: ETag.null)
        #expect(!stale.applied && ETag.of(node: stale.value, version: stale.version) == etag)
        #expect(try await put(2, ifMatch: "garbage").applied == false)
        #expect(try await put(2, ifMatch: etag).applied)
        let read = try node.ports.reader.read(namespace: "t", path: path)
        #expect(read.node == Node(.int(2)) && ETag.of(node: read.node, version: read.version) != etag)
    }
}
