import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// The seed's star transaction and atomic increments, from many independent clients.
@Suite(.timeLimit(.minutes(1))) struct TransactionIntegrationTests {
    /// The seed's block, for one user.
    static func toggleStar(uid: String) -> @Sendable (MutableData) -> TransactionResult {
        { currentData in
            if var post = currentData.value as? [String: Any] {
                var stars = post["stars"] as? [String: Bool] ?? [:]
                var starCount = post["starCount"] as? Int ?? 0
                if stars[uid] != nil {
                    starCount -= 1
                    stars.removeValue(forKey: uid)
                } else {
                    starCount += 1
                    stars[uid] = true
                }
                post["starCount"] = starCount
                post["stars"] = stars
                currentData.value = post
                return TransactionResult.success(withValue: currentData)
            }
            return TransactionResult.success(withValue: currentData)
        }
    }

    @Test func starTransactionFromTenClientsLeavesAnExactCount() async throws {
        let t = try await TestNamespace.make()
        try await t.server.restPut("posts/p1", ns: t.ns, json: #"{"title":"Hi","starCount":0}"#)
        let clients = (0..<10).map { _ in t.client() }
        defer { clients.forEach { $0.shutdown() } }
        let results = try await withTimeout(.seconds(40)) {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for (i, db) in clients.enumerated() {
                    group.addTask {
                        try await db.reference(withPath: "posts/p1").runTransactionBlock(Self.toggleStar(uid: "user\(i)")).committed
                    }
                }
                var all: [Bool] = []
                for try await c in group { all.append(c) }
                return all
            }
        }
        #expect(results == Array(repeating: true, count: 10))
        let stored = try await t.server.restGet("posts/p1", ns: t.ns)
        #expect(stored["starCount"] == .int(10))
        #expect(stored["stars"]?.objectValue?.count == 10)
        #expect(stored["title"] == .string("Hi"))
    }

    @Test func transactionCompletionGetsCommittedSnapshotAndLocalEvents() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "counter")
        try await ref.setValue(41)
        let rec = Recorder()
        ref.observe(.value) { s in rec.add("\(s.value as? Int ?? -1)") }
        await rec.wait { $0 == ["41"] }
        let done = Recorder()
        ref.runTransactionBlock({ data in
            data.value = (data.value as? Int ?? 0) + 1
            return .success(withValue: data)
        }, andCompletionBlock: { error, committed, snap in
            done.add("\(error == nil) \(committed) \(snap?.value as? Int ?? -1)")
        })
        await done.wait { $0 == ["true true 42"] }
        await rec.wait { $0.last == "42" }
        // Aborting leaves the data alone and reports committed == false without an error.
        let aborted = try await ref.runTransactionBlock { _ in .abort() }
        #expect(aborted.committed == false)
        #expect(aborted.snapshot.value as? Int == 42)
    }

    @Test func keepSyncedTransactionRunsOnCachedValueFirstTime() async throws {
        let t = try await TestNamespace.make()
        try await t.server.restPut("likes", ns: t.ns, json: "10")
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "likes")
        ref.keepSynced(true)
        #expect(try await eventually { db.repo.queue.sync { db.repo.syncTree.calcCompleteEventCache(ref.path) } != nil })
        let runs = Recorder()
        let result = try await ref.runTransactionBlock { data in
            runs.add("\(data.value as? Int ?? -1)")
            data.value = (data.value as? Int ?? 0) + 1
            return .success(withValue: data)
        }
        #expect(result.committed)
        #expect(runs.all == ["10"], "no rerun: the cached value was current")
        #expect(try await t.server.restGet("likes", ns: t.ns) == .int(11))
        ref.keepSynced(false)
    }

    @Test func transactionOnMissingDataStartsFromNil() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let result = try await db.reference(withPath: "fresh").runTransactionBlock { data in
            data.value = ["n": (data.childData(byAppendingPath: "n").value as? Int ?? 0) + 1]
            return .success(withValue: data)
        }
        #expect(result.committed)
        #expect(try await t.server.restGet("fresh/n", ns: t.ns) == .int(1))
    }

    @Test func incrementFromManyClientsGivesAnExactTotal() async throws {
        let t = try await TestNamespace.make()
        let clients = (0..<8).map { _ in t.client() }
        defer { clients.forEach { $0.shutdown() } }
        try await withTimeout(.seconds(30)) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (i, db) in clients.enumerated() {
                    group.addTask {
                        for _ in 0..<5 {
                            try await db.reference().updateChildValues([
                                "posts/p1/stars/user\(i)": true,
                                "posts/p1/starCount": ServerValue.increment(1),
                                "user-posts/p1/stars/user\(i)": true,
                                "user-posts/p1/starCount": ServerValue.increment(1),
                            ])
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        #expect(try await t.server.restGet("posts/p1/starCount", ns: t.ns) == .int(40))
        #expect(try await t.server.restGet("user-posts/p1/starCount", ns: t.ns) == .int(40))
        // A listener converges on the same total.
        let snap = try await clients[0].reference(withPath: "posts/p1/starCount").getData()
        #expect(snap.value as? Int == 40)
    }
}

extension TransactionIntegrationTests {
    @Test func serverValuesInsideATransactionAreResolvedByTheServer() async throws {
        let t = try await TestNamespace.make()
        try await t.server.restPut("stats", ns: t.ns, json: #"{"count":1}"#)
        let db = t.client()
        defer { db.shutdown() }
        let seen = Recorder()
        let result = try await db.reference(withPath: "stats").runTransactionBlock { data in
            data.childData(byAppendingPath: "count").value = ServerValue.increment(10)
            data.childData(byAppendingPath: "at").value = ServerValue.timestamp()
            data.childData(byAppendingPath: "note").value = "n"
            data.childData(byAppendingPath: "note").priority = 3
            seen.add("\(data.childData(byAppendingPath: "count").value as? Int ?? -1)")
            return .success(withValue: data)
        }
        #expect(result.committed)
        #expect(seen.all.last == "11", "local estimate")
        let stored = try await t.server.restGet("stats", ns: t.ns)
        #expect(stored["count"] == .int(11))
        #expect((stored["at"]?.numberValue ?? 0) > 1_600_000_000_000)
        #expect(result.snapshot.childSnapshot(forPath: "note").priority as? Double == 3)
    }
}

extension TransactionIntegrationTests {
    /// Sustained contention: 3 clients × 5 counter transactions each, all concurrent. (Each
    /// round commits one contender, so with 10 clients sustained the SDK's 25-retry budget runs
    /// out for some transaction — as with the Firebase SDKs.)
    @Test func contendedCounterTransactionsAreExact() async throws {
        let t = try await TestNamespace.make()
        let clients = (0..<3).map { _ in t.client() }
        defer { clients.forEach { $0.shutdown() } }
        let committed = try await withTimeout(.seconds(40)) {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for db in clients {
                    group.addTask {
                        var n = 0
                        for _ in 0..<5 {
                            let r = try await db.reference(withPath: "counter").runTransactionBlock { data in
                                data.value = (data.value as? Int ?? 0) + 1
                                return .success(withValue: data)
                            }
                            if r.committed { n += 1 }
                        }
                        return n
                    }
                }
                var total = 0
                for try await n in group { total += n }
                return total
            }
        }
        #expect(committed == 15)
        #expect(try await t.server.restGet("counter", ns: t.ns) == .int(15))
    }
}
