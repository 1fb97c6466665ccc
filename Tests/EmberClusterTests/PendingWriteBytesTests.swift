import EmberCore
import EmberNodeStore
import Foundation
import Synchronization
import Testing

@testable import EmberCluster

/// Admission control by bytes (`ClusterConfiguration.maxPendingWriteBytes`): writes past it are
/// refused (503, retryable) with nothing written, one write alone is always admitted, and every
/// outcome gives its bytes back.
@Suite(.serialized) struct PendingWriteBytesTests {
    static let limit = 64 << 10

    @Test(.enabled(if: ReplicatedDataStoreTests.openssl != nil)) func writesPastTheByteBoundAreRefusedAndNothingLeaks() async throws {
        let (dir, nodes) = try await ReplicatedDataStoreTests.openThree { $0.maxPendingWriteBytes = Self.limit }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let leader = try await ReplicatedDataStoreTests().leader(of: nodes)

        // The bound itself: one write alone is admitted whatever its size; past the bound, not.
        #expect(leader.admit(1, bytes: 4 * Self.limit))
        #expect(!leader.admit(1, bytes: 10))
        leader.release(1, bytes: 4 * Self.limit)
        #expect(leader.admit(1, bytes: Self.limit / 2) && leader.admit(1, bytes: Self.limit / 2))
        #expect(!leader.admit(1, bytes: 1))
        leader.release(2, bytes: Self.limit)
        #expect(leader.host.pendingRequests.load(ordering: .relaxed) == 0 && leader.host.pendingRequestBytes.load(ordering: .relaxed) == 0)

        // Concurrent writes of 40 KB through the leader and a follower: each is applied, or
        // refused as overloaded with nothing of it written.
        let big = String(repeating: "x", count: 40 << 10)
        let follower = nodes.first { $0 !== leader }!
        let outcomes = await withTaskGroup(of: (Int, Bool?).self) { group -> [(Int, Bool?)] in
            for i in 0..<24 {
                let node = i % 2 == 0 ? leader : follower
                group.addTask {
                    do {
                        let r = try await node.write(WriteRequest(namespace: "ns", path: try Path("w\(i)"), kind: .set(.string(big)), identity: .admin))
                        return (i, r.applied)
                    } catch let e as StoreUnavailable {
                        #expect(e.message.contains(ClusterError.overloaded.description), "\(e)")
                        return (i, nil)
                    } catch {
                        Issue.record("unexpected error \(error)")
                        return (i, false)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        try await leader.ports.reader.linearizableBarrier()
        for (i, applied) in outcomes {
            let node = try leader.reader.read(namespace: "ns", path: Path("w\(i)")).node
            if applied == true { #expect(try node == Node(json: .string(big))) } else { #expect(applied == nil && node.isEmpty) }
        }
        #expect(outcomes.contains { $0.1 == true })
        for n in nodes {
            #expect(n.host.pendingRequests.load(ordering: .relaxed) == 0 && n.host.pendingRequestBytes.load(ordering: .relaxed) == 0)
        }
        for n in nodes { await n.shutdown() }
    }
}
