import EmberCore
import Foundation

/// Whether a write replaces a value with the identical one (`Applier.write` skips it), asked once
/// per applied set on every member (issue 38: a learner's apply is its whole CPU per write).
/// `Node.isIdentical` compares a string leaf through `String.UTF8View.elementsEqual`, a byte at a
/// time through the view's iterator; the common write (a string leaf over a string leaf of
/// another value, `ember-bench`'s and most apps') is decided here by the lengths and one `memcmp`
/// of the two strings' contiguous UTF-8. Anything else is `isIdentical`'s, unchanged.
enum SameValue {
    static func identical(_ node: Node, _ old: Node) -> Bool {
        if case .string(let a)? = node.leaf, case .string(let b)? = old.leaf {
            guard node.priority == old.priority else { return false }
            return sameBytes(a, b)
        }
        return node.isIdentical(to: old)
    }

    /// Byte equality of two strings' UTF-8 (canonically equivalent strings are different values,
    /// as `Leaf.==` says).
    static func sameBytes(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        // Native strings are contiguous already; a bridged one is made so (a copy, once).
        a.makeContiguousUTF8()
        b.makeContiguousUTF8()
        guard a.utf8.count == b.utf8.count else { return false }
        return a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0
            }
        }.flatMap { $0 } ?? a.utf8.elementsEqual(b.utf8)
    }
}
