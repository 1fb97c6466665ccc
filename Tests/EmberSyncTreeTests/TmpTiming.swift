import EmberCore
import Foundation
import Testing
@testable import EmberSyncTree

@Test func tmpTimingPrevSibling() throws {
    // 2,000 children; the initial replay asks the previous sibling of every child.
    var kids: [String: Node] = [:]
    for i in 0..<2000 { kids["k\(i)"] = try Node(json: .object(["n": .int(Int64((i * 7919) % 2000))])) }
    let node = Node(children: kids)
    let index = QueryIndex.child(Path(validated: ["n"]))
    var t = Date()
    var a = 0
    for k in kids.keys { if node.predecessorKey(of: k, by: index) != nil { a += 1 } }
    let linear = Date().timeIntervalSince(t)
    t = Date()
    let sorted = SortedChildren(index: index, node: node)
    var b = 0
    for (k, n) in kids { if case .some(.some) = sorted.predecessor(of: k, n) { b += 1 } }
    let binary = Date().timeIntervalSince(t)
    print("TIMING 2000 children, prevName for each: linear scan \(linear) s, sorted index (incl. build) \(binary) s; \(a) \(b)")
    let tree = SyncTree(listenProvider: FakeListenProvider())
    let q = SyncQuery(path: Path(validated: ["items"]), spec: QuerySpec(index: index))
    _ = tree.addEventRegistration(q, RegistrationID(1))
    t = Date()
    for (k, n) in kids { _ = tree.applyServerOverwrite(Path(validated: ["items", k]), n) }
    print("TIMING 2000 child_added one write each through the sync tree: \(Date().timeIntervalSince(t)) s")
    t = Date()
    let ev = tree.addEventRegistration(q, RegistrationID(2))
    print("TIMING replay of 2000 children to a new registration: \(Date().timeIntervalSince(t)) s, \(ev.count) events")
}
