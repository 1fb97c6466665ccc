import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// Hash points (`EmberStore.statePoint`): the apply stops at a requested index and the state
/// there is snapshotted while the apply goes on, so members under steady writes can compare
/// their hashes at one index (the corruption check).
@Suite struct StatePointTests {
    /// A leader's log of `count` sets, and the hash after each entry.
    static func history(_ count: Int) async throws -> (entries: [LogEntry], hashes: [UInt64: String]) {
        let leader = try openStore()
        var hashes: [UInt64: String] = [:]
        for i in 1...count {
            try await leader.set("/r/\(i % 7)", "\(i)")
            hashes[leader.appliedIndex] = try leader.stateHash()
        }
        return (try leader.entries(from: 1), hashes)
    }

    @Test func theApplyStopsAtPointsAndTheirHashesAreTheStateThere() async throws {
        let (entries, hashes) = try await Self.history(40)
        let f = try openStore()
        try await f.append(entries: entries)
        let at7 = f.requestStatePoint(at: 7, timeout: .seconds(600))
        let at23 = f.requestStatePoint(at: 23, timeout: .seconds(600))
        // One apply over all 40 (one batch without the points), queued after the requests.
        try await f.applyCommitted(through: 40)
        #expect(f.appliedIndex == 40)
        let p7 = try #require(await at7.value)
        let p23 = try #require(await at23.value)
        defer { p7.end(); p23.end() }
        #expect(p7.index == 7 && p23.index == 23)
        #expect(try p7.hash() == hashes[7])
        #expect(try p23.hash() == hashes[23])
        #expect(try f.stateHash() == hashes[40])
    }

    @Test func appendAndApplyStopsAtAPointToo() async throws {
        let (entries, hashes) = try await Self.history(20)
        let f = try openStore()
        let at12 = f.requestStatePoint(at: 12, timeout: .seconds(600))
        try await f.appendAndApply(entries: entries, through: 20)
        #expect(f.appliedIndex == 20)
        let p12 = try #require(await at12.value)
        defer { p12.end() }
        #expect(p12.index == 12)
        #expect(try p12.hash() == hashes[12])
    }

    @Test func thePresentIsAnsweredAtOnceAndThePastWithNil() async throws {
        let (entries, hashes) = try await Self.history(10)
        let f = try openStore()
        try await f.apply(entries: entries)
        let now = try #require(await f.statePoint(at: 10, timeout: .seconds(600)))
        #expect(now.index == 10)
        #expect(try now.hash() == hashes[10])
        now.end()
        #expect(await f.statePoint(at: 4, timeout: .seconds(600)) == nil)
    }

    @Test func aPointNeverReachedTimesOut() async throws {
        let f = try openStore()
        try await f.set("/a", "1")
        #expect(await f.statePoint(at: 99, timeout: .milliseconds(50)) == nil)
        // The writer still answers the point later without harm (its snapshot is ended).
        try await f.set("/b", "2")
        #expect(try f.get("/b") == n("2"))
    }
}
