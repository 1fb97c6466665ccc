import CLMDB
import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// NOSPACE and CORRUPT on real LMDB stores: a map that fills up fails the write that does not
/// fit (nothing half-applied), raises NOSPACE and leaves reads working; a bigger map on reopen
/// takes writes again with every acknowledged one there. CORRUPT survives a reopen (its marker
/// file) until cleared. The state hash at an applied index comes from one read.
@Suite struct StoreAlarmsTests {
    static let value = "\"" + String(repeating: "v", count: 50_000) + "\""

    @Test func aFullMapFailsTheWriteRaisesNoSpaceAndKeepsReadsUntilABiggerMap() async throws {
        let dir = tempDir()
        var small = smallOptions()
        small.mapSize = 2 << 20
        var acked: [String] = []
        do {
            let store = try openStore(dir, small)
            var failure: (any Error)?
            for i in 0..<200 {
                do { try await store.set("fill/k\(i)", Self.value) } catch { failure = error; break }
                acked.append("k\(i)")
            }
            let error = try #require(failure, "2 MiB took 200 writes of 50 KB")
            #expect(SpaceGuard.isNoSpace(error), "\(error)")
            #expect(store.alarms.active(.noSpace) != nil)
            #expect(!store.space.hasRoom)
            // Reads go on, and hold every acknowledged write; the refused one is not half there.
            for k in acked { #expect(try store.get("fill/\(k)") == n(Self.value)) }
            #expect(try store.get("fill/k\(acked.count)") == n("null"))
            store.close()
        }
        var big = smallOptions()
        big.mapSize = 64 << 20
        let store = try openStore(dir, big)
        #expect(store.alarms.active(.noSpace) == nil)
        #expect(store.space.hasRoom)
        try await store.set("fill/after", Self.value)
        for k in acked + ["after"] { #expect(try store.get("fill/\(k)") == n(Self.value)) }
        store.close()
    }

    @Test func theGuardRefusesBelowItsReserveBeforeAnyCommitFails() throws {
        var o = smallOptions()
        o.mapSize = 8 << 20
        let store = try openStore(tempDir(), o)
        defer { store.close() }
        #expect(store.space.reserve == 1 << 20)  // an eighth of a small map
        let room = try #require(store.space.room)
        #expect(room.mapBytes > store.space.reserve && room.mapBytes <= 8 << 20)
        #expect(room.filesystemBytes > 0)
        #expect(store.space.hasRoom)
    }

    @Test func corruptSurvivesAReopenUntilCleared() throws {
        let dir = tempDir()
        do {
            let store = try openStore(dir)
            let seen = Seen()
            store.alarms.observe { kind, alarm in seen.add(kind, raised: alarm != nil) }
            #expect(store.alarms.raise(.corrupt, "hash differs"))
            #expect(!store.alarms.raise(.corrupt, "again"))  // the first message stays
            #expect(FileManager.default.fileExists(atPath: dir + "/" + StoreAlarms.markerFile))
            #expect(seen.list == ["CORRUPT raised"])
            store.close()
        }
        do {
            let store = try openStore(dir)
            #expect(store.alarms.active(.corrupt)?.message == "hash differs")
            store.alarms.clear(.corrupt)
            #expect(!FileManager.default.fileExists(atPath: dir + "/" + StoreAlarms.markerFile))
            store.close()
        }
        let store = try openStore(dir)
        #expect(store.alarms.all.isEmpty)
        store.close()
    }

    @Test func theHashAtAppliedIsOneReadsPair() async throws {
        let store = try openStore()
        defer { store.close() }
        try await store.set("a", "1")
        try await store.set("b", "2")
        let pair = try store.stateHashAtApplied()
        #expect(pair.applied == store.appliedIndex)
        #expect(pair.hash == (try store.stateHash()))
        try await store.set("a", "3")
        #expect(try store.stateHashAtApplied().hash != pair.hash)
    }
}

/// What an alarm observer was told, in order.
final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [String] = []
    func add(_ kind: StoreAlarms.Kind, raised: Bool) {
        lock.lock(); events.append("\(kind.rawValue) \(raised ? "raised" : "cleared")"); lock.unlock()
    }
    var list: [String] { lock.lock(); defer { lock.unlock() }; return events }
}
