/// What an applied text update (`UpdateText`) answers, built from its text when asked (issue 42):
/// a store that wrote the parts' records straight from the text built no node, and most such
/// answers are never read (an import's PATCHes ask `print=silent`; a follower's and a learner's
/// results feed no listener). The nodes are those the apply would have built: a text update's
/// values need nothing from the data.
public struct TextPatch: Sendable, Equatable {
    public let text: UpdateText
    /// The update's path: the parts lie below it.
    public let base: Path
    /// Which parts changed the state (their changes are the listeners').
    public let changed: [Bool]

    public init(text: UpdateText, base: Path, changed: [Bool]) {
        precondition(changed.count == text.count, "one flag per part")
        self.text = text
        self.base = base
        self.changed = changed
    }

    /// Part `i`'s node. The apply read every part's text before it wrote anything, so none fails
    /// here (an empty node would stand for one that did).
    public func node(_ i: Int) -> Node {
        do throws(EmberError) {
            return try text.node(i, depth: base.count + text.parts[i].path.count)
        } catch {
            assertionFailure("a part applied from its text does not build: \(error)")
            return .empty
        }
    }

    /// The resolved patch: the parts at their relative paths (as the apply's `value`).
    public var value: Node {
        let sorted = zip(text.parts, text.parts.dropFirst()).allSatisfy { $0.0.path < $0.1.path }
        if sorted {
            return Node.assembling(text.parts.indices.map { (text.parts[$0].path, node($0)) })
        }
        var patch = Node.empty
        for i in text.parts.indices { patch.set(node(i), at: text.parts[i].path) }
        return patch
    }

    /// The changed parts at their absolute paths, in part order (as the apply's change set).
    public var changes: [(path: Path, node: Node)] {
        text.parts.indices.filter { changed[$0] }.map { (base.appending(text.parts[$0].path), node($0)) }
    }

    /// About the bytes the answer holds (the parts' text), without building it.
    public var textBytes: Int { text.parts.reduce(0) { $0 + $1.range.count } }
}
