import EmberCore
import Testing
@testable import EmberStorage

/// `WriteResult.value` and `changeSet` are computed (built from a `TextPatch` when an apply
/// built no node): changing them in place must not copy their storage. Through a get and a set,
/// every append of a bulk update's changes copied the whole array: a 256 MB import into one
/// node took 36.6 s instead of 5.1 (f581247, mended by the `_modify` accessors).
@Suite struct WriteResultInPlaceTests {
    static func result() -> WriteResult {
        WriteResult(index: 1, term: 1, namespace: "n", path: Path.root, outcome: .applied(changed: true), value: .empty,
                    version: 1, changeSet: ChangeSet(namespace: "n", changes: []))
    }

    @Test func appendingAChangeKeepsTheArraysStorage() throws {
        var r = Self.result()
        r.changeSet.changes.reserveCapacity(16)
        let storage = r.changeSet.changes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        // Checked after every append: copies could alternate between two buffers, the freed one
        // reused by the next copy.
        for k in 0..<8 {
            r.changeSet.changes.append((try Path("/k\(k)"), Node(.int(Int64(k)))))
            #expect(r.changeSet.changes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == storage)
        }
        #expect(r.changeSet.changes.count == 8)
    }

    @Test func aChangeMadeInPlaceOverATextPatchStartsFromItsChanges() throws {
        let body = Array(#"{"a":1,"b":{"c":"x"}}"#.utf8)
        let text = UpdateText(bytes: body, parts: [(try Path("a"), 5..<6), (try Path("b"), 11..<20)])
        var r = Self.result()
        r.buildLater(from: TextPatch(text: text, base: Path.root, changed: [true, false]))
        #expect(r.changeSet.changes.map(\.path) == [try Path("/a")])
        r.changeSet.changes.append((try Path("/z"), Node(.bool(true))))
        #expect(r.changeSet.changes.map(\.path) == [try Path("/a"), try Path("/z")])
        #expect(r.value.child(at: try Path("b/c")) == Node(.string("x")))
        r.value.set(Node(.int(2)), at: try Path("d"))
        #expect(r.value.child(at: try Path("a")) == Node(.int(1)))
        #expect(r.value.child(at: try Path("d")) == Node(.int(2)))
    }

    /// An applied set's change is built when read (issue 38: no array per write where no
    /// listener reads it): it is the set's path and value, equal to one built at once, and it
    /// keeps the value the apply gave it when the result is changed afterwards.
    @Test func aSetsChangeIsItsPathAndValueBuiltWhenRead() throws {
        let path = try Path("a/b")
        var lazy = WriteResult(index: 3, term: 1, namespace: "n", path: path, outcome: .applied(changed: true),
                               value: Node(.int(7)), version: 3, changeSet: ChangeSet(namespace: "n", changes: []))
        lazy.changesFollowValue()
        let eager = WriteResult(index: 3, term: 1, namespace: "n", path: path, outcome: .applied(changed: true),
                                value: Node(.int(7)), version: 3, changeSet: ChangeSet(namespace: "n", changes: [(path, Node(.int(7)))]))
        #expect(lazy.changeSet == eager.changeSet)
        #expect(lazy == eager)
        #expect(lazy.changeSet.changes.map(\.path) == [path])

        var moved = lazy
        moved.value = Node(.int(8))
        moved.path = try Path("c")
        #expect(moved.changeSet == ChangeSet(namespace: "n", changes: [(path, Node(.int(7)))]))
        var renamed = lazy
        renamed.namespace = "m"
        #expect(renamed.changeSet.namespace == "n")
        var inPlace = lazy
        inPlace.value.set(Node(.int(1)), at: try Path("x"))
        #expect(inPlace.changeSet.changes.map(\.node) == [Node(.int(7))])
        var appended = lazy
        appended.changeSet.changes.append((try Path("z"), Node(.bool(true))))
        #expect(appended.changeSet.changes.map(\.path) == [path, try Path("z")])
        var cleared = lazy
        cleared.changeSet = ChangeSet(namespace: "n", changes: [])
        #expect(cleared.changeSet.changes.isEmpty)
    }
}
