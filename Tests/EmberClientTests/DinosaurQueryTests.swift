import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// The legacy "Retrieving Data" guide's dinosaur queries, as child events from a real server.
@Suite(.timeLimit(.minutes(1))) struct DinosaurQueryTests {
    static let dinosaurs = """
    {"dinosaurs":{
      "bruhathkayosaurus":{"appeared":-70000000,"height":25,"length":44,"order":"saurischia","vanished":-70000000,"weight":135000},
      "lambeosaurus":{"appeared":-76000000,"height":2.1,"length":12.5,"order":"ornithischia","vanished":-75000000,"weight":5000},
      "linhenykus":{"appeared":-85000000,"height":0.6,"length":1,"order":"theropoda","vanished":-75000000,"weight":3},
      "pterodactyl":{"appeared":-150000000,"height":0.6,"length":0.8,"order":"pterosauria","vanished":-148500000,"weight":2},
      "stegosaurus":{"appeared":-155000000,"height":4,"length":9,"order":"ornithischia","vanished":-150000000,"weight":2500},
      "triceratops":{"appeared":-68000000,"height":3,"length":8,"order":"ornithischia","vanished":-66000000,"weight":11000}},
     "scores":{"bruhathkayosaurus":55,"lambeosaurus":21,"linhenykus":80,"pterodactyl":93,"stegosaurus":5,"triceratops":22},
     "nested":{"lambeosaurus":{"dimensions":{"height":2.1}},"stegosaurus":{"dimensions":{"height":4}},"tiny":{"dimensions":{"height":0.1}}}}
    """

    func seeded(_ name: String = #function) async throws -> (TestNamespace, Database) {
        let t = try await TestNamespace.make(name)
        try await t.server.restPut("", ns: t.ns, json: Self.dinosaurs)
        return (t, t.client())
    }

    /// The keys of the initial childAdded events, checking that the value event comes after them.
    func initialChildren(_ q: DatabaseQuery) async -> [String] {
        let rec = Recorder()
        let h1 = q.observe(.childAdded) { s in rec.add("+\(s.key)") }
        let h2 = q.observe(.value) { s in rec.add("=\(s.childrenCount)") }
        let all = await rec.wait { $0.contains { $0.hasPrefix("=") } }
        q.removeObserver(withHandle: h1)
        q.removeObserver(withHandle: h2)
        let added = all.prefix { $0.hasPrefix("+") }.map { String($0.dropFirst()) }
        #expect(all.count == added.count + 1, "value comes last: \(all)")
        #expect(all.last == "=\(added.count)")
        return added
    }

    @Test func orderingQueries() async throws {
        let (_, db) = try await seeded()
        defer { db.shutdown() }
        let dinos = db.reference(withPath: "dinosaurs")
        #expect(await initialChildren(dinos.queryOrdered(byChild: "height"))
                == ["linhenykus", "pterodactyl", "lambeosaurus", "triceratops", "stegosaurus", "bruhathkayosaurus"])
        #expect(await initialChildren(dinos.queryOrderedByKey())
                == ["bruhathkayosaurus", "lambeosaurus", "linhenykus", "pterodactyl", "stegosaurus", "triceratops"])
        #expect(await initialChildren(db.reference(withPath: "scores").queryOrderedByValue())
                == ["stegosaurus", "lambeosaurus", "triceratops", "bruhathkayosaurus", "linhenykus", "pterodactyl"])
        #expect(await initialChildren(db.reference(withPath: "nested").queryOrdered(byChild: "dimensions/height"))
                == ["tiny", "lambeosaurus", "stegosaurus"])
        let snap = try await dinos.queryOrdered(byChild: "height").getData()
        #expect(snap.children.map(\.key).first == "linhenykus")
    }

    @Test func limitAndRangeQueries() async throws {
        let (_, db) = try await seeded()
        defer { db.shutdown() }
        let dinos = db.reference(withPath: "dinosaurs")
        #expect(await initialChildren(dinos.queryOrdered(byChild: "weight").queryLimited(toLast: 2)) == ["triceratops", "bruhathkayosaurus"])
        #expect(await initialChildren(dinos.queryOrdered(byChild: "height").queryLimited(toFirst: 2)) == ["linhenykus", "pterodactyl"])
        #expect(await initialChildren(dinos.queryOrdered(byChild: "height").queryLimited(toLast: 2)) == ["stegosaurus", "bruhathkayosaurus"])
        #expect(await initialChildren(db.reference(withPath: "scores").queryOrderedByValue().queryLimited(toLast: 3))
                == ["bruhathkayosaurus", "linhenykus", "pterodactyl"])
        #expect(await initialChildren(dinos.queryOrdered(byChild: "height").queryStarting(atValue: 3))
                == ["triceratops", "stegosaurus", "bruhathkayosaurus"])
        #expect(await initialChildren(dinos.queryOrderedByKey().queryEnding(atValue: "pterodactyl"))
                == ["bruhathkayosaurus", "lambeosaurus", "linhenykus", "pterodactyl"])
        #expect(await initialChildren(dinos.queryOrderedByKey().queryStarting(atValue: "b").queryEnding(atValue: "b\u{f8ff}"))
                == ["bruhathkayosaurus"])
        #expect(await initialChildren(dinos.queryOrdered(byChild: "height").queryEqual(toValue: 25)) == ["bruhathkayosaurus"])
        #expect(await initialChildren(dinos.queryOrdered(byChild: "height").queryStarting(afterValue: 3)) == ["stegosaurus", "bruhathkayosaurus"])
        #expect(await initialChildren(dinos.queryOrdered(byChild: "height").queryEnding(beforeValue: 2.1)) == ["linhenykus", "pterodactyl"])
        // "Putting it all together": the dinosaur just shorter than the stegosaurus.
        let shorter = await dinos.queryOrdered(byChild: "height").queryEnding(atValue: 4).queryLimited(toLast: 2)
            .observeSingleEvent(of: .value)
        #expect(shorter.childrenCount == 2)
        #expect(shorter.children.nextObject().map { ($0 as! DataSnapshot).key } == "triceratops")
    }

    @Test func limitWindowMovesWithChildRemovedAndChildAdded() async throws {
        let (t, db) = try await seeded()
        let writer = t.client()
        defer { db.shutdown(); writer.shutdown() }
        let q = db.reference(withPath: "dinosaurs").queryOrdered(byChild: "height").queryLimited(toLast: 2)
        let rec = Recorder()
        q.observe(.childAdded, andPreviousSiblingKeyWith: { s, prev in rec.add("added \(s.key) prev=\(prev ?? "nil")") })
        q.observe(.childRemoved) { s in rec.add("removed \(s.key)") }
        q.observe(.value) { s in rec.add("value \(s.children.map(\.key).joined(separator: ","))") }
        await rec.wait { $0.contains("value stegosaurus,bruhathkayosaurus") }
        #expect(rec.all == ["added stegosaurus prev=nil", "added bruhathkayosaurus prev=stegosaurus", "value stegosaurus,bruhathkayosaurus"])
        rec.clear()
        try await writer.reference(withPath: "dinosaurs/argentinosaurus").setValue(["height": 30, "weight": 70000])
        await rec.wait { $0.contains("value bruhathkayosaurus,argentinosaurus") }
        #expect(rec.all == ["removed stegosaurus", "added argentinosaurus prev=bruhathkayosaurus", "value bruhathkayosaurus,argentinosaurus"])
        rec.clear()
        // Removing a child inside the window pulls the next one in.
        try await writer.reference(withPath: "dinosaurs/argentinosaurus").removeValue()
        await rec.wait { $0.contains("value stegosaurus,bruhathkayosaurus") }
        #expect(rec.all == ["removed argentinosaurus", "added stegosaurus prev=nil", "value stegosaurus,bruhathkayosaurus"])
    }

    @Test func reorderingRaisesChildMovedAndChildChanged() async throws {
        let (t, db) = try await seeded()
        let writer = t.client()
        defer { db.shutdown(); writer.shutdown() }
        let q = db.reference(withPath: "dinosaurs").queryOrdered(byChild: "height")
        let rec = Recorder()
        q.observe(.childMoved, andPreviousSiblingKeyWith: { s, prev in rec.add("moved \(s.key) prev=\(prev ?? "nil")") })
        q.observe(.childChanged, andPreviousSiblingKeyWith: { s, prev in rec.add("changed \(s.key) prev=\(prev ?? "nil")") })
        q.observe(.value) { _ in rec.add("value") }
        await rec.wait { $0 == ["value"] }
        rec.clear()
        try await writer.reference(withPath: "dinosaurs/triceratops/height").setValue(1)
        await rec.wait { $0.contains("value") }
        #expect(rec.all == ["moved triceratops prev=pterodactyl", "changed triceratops prev=pterodactyl", "value"])
        // A change that keeps the order is not a move.
        rec.clear()
        try await writer.reference(withPath: "dinosaurs/triceratops/weight").setValue(12000)
        await rec.wait { $0.contains("value") }
        #expect(rec.all == ["changed triceratops prev=pterodactyl", "value"])
    }

    @Test func localWriteIntoAFilteredQueryFiresBeforeTheServerAnswers() async throws {
        let (_, db) = try await seeded()
        defer { db.shutdown() }
        let q = db.reference(withPath: "scores").queryOrderedByValue().queryLimited(toLast: 3)
        let rec = Recorder()
        q.observe(.childAdded) { s in rec.add("added \(s.key)") }
        q.observe(.childRemoved) { s in rec.add("removed \(s.key)") }
        _ = await rec.wait(count: 3)
        rec.clear()
        withoutWaiting { db.reference(withPath: "scores/trex").setValue(100) }
        await rec.wait { $0 == ["removed bruhathkayosaurus", "added trex"] }
    }

    /// A filtered query keeps its events while a parent listen takes over its data and after the
    /// parent goes away again (listen hand-over on the wire).
    @Test func filteredQuerySurvivesParentListenHandOver() async throws {
        let (t, db) = try await seeded()
        defer { db.shutdown() }
        let q = db.reference(withPath: "scores").queryOrderedByValue().queryLimited(toLast: 1)
        let rec = Recorder()
        q.observe(.childAdded) { s in rec.add("added \(s.key)") }
        await rec.wait { $0 == ["added pterodactyl"] }
        let parent = db.reference().observe(.value) { _ in }
        try await t.server.restPut("scores/trex", ns: t.ns, json: "100")
        await rec.wait { $0 == ["added pterodactyl", "added trex"] }
        db.reference().removeObserver(withHandle: parent)
        // The hand-over back to the query's own listen reaches the server before the next change:
        // the repo has sent it, and a write acknowledged after it on the same connection means
        // the server handled it.
        await db.eventsDelivered()
        try await db.reference(withPath: "handover-barrier").setValue(true)
        try await t.server.restPut("scores/raptor", ns: t.ns, json: "200")
        await rec.wait { $0 == ["added pterodactyl", "added trex", "added raptor"] }
    }
}
