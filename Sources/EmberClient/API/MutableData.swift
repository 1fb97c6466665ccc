import EmberCore
import Foundation

/// The data a transaction block reads and modifies (SDK `MutableData`). Children obtained with
/// `childData(byAppendingPath:)` write through to the same tree. Used only inside the block,
/// on the client's internal queue.
public final class MutableData: CustomStringConvertible {
    final class Box {
        var root: Node
        init(_ root: Node) { self.root = root }
    }

    private let box: Box
    private let path: Path
    private let now: Int64

    init(node: Node, now: Int64) {
        box = Box(node)
        path = .root
        self.now = now
    }

    private init(box: Box, path: Path, now: Int64) {
        self.box = box
        self.path = path
        self.now = now
    }

    var root: Node { box.root }
    private var node: Node { box.root.child(at: path) }

    private func replace(_ newNode: Node) {
        box.root = box.root.setting(newNode, at: path)
    }

    /// Read: see `DataSnapshot.value`. Write: the same types `setValue` accepts; invalid data
    /// is a programming error, as in the SDK.
    public var value: Any? {
        get { ValueConverter.value(of: node) }
        set {
            do {
                let json = try ValueConverter.json(from: newValue)
                let resolved = try ServerValues.resolve(json, existing: node, now: now)
                replace(try Node(json: resolved, depth: path.count).withPriority(node.priority))
            } catch {
                preconditionFailure("Invalid value for MutableData: \(error)")
            }
        }
    }

    public var priority: Any? {
        get { ValueConverter.priorityValue(node.priority) }
        set {
            do {
                let p = try Priority(json: ValueConverter.priorityJSON(newValue))
                replace(node.withPriority(p))
            } catch {
                preconditionFailure("Invalid priority for MutableData: \(error)")
            }
        }
    }

    public var key: String? { path.last }
    public var childrenCount: UInt { UInt(node.childCount) }
    public func hasChildren() -> Bool { node.hasChildren }

    public func hasChild(atPath path: String) -> Bool {
        guard let p = try? Path(path) else { return false }
        return !node.child(at: p).isEmpty
    }

    public func childData(byAppendingPath path: String) -> MutableData {
        let p = (try? Path(path)) ?? .root
        return MutableData(box: box, path: self.path.appending(p), now: now)
    }

    public var children: [MutableData] {
        QuerySpec.default.sortedChildren(of: node).map { MutableData(box: box, path: path.child($0.key), now: now) }
    }

    public var description: String { "MutableData (\(key ?? "")) \(node.exportJSON().serialized())" }
}

/// What a transaction block returns (SDK `TransactionResult`).
public final class TransactionResult {
    let isSuccess: Bool
    let data: MutableData?

    private init(isSuccess: Bool, data: MutableData?) {
        self.isSuccess = isSuccess
        self.data = data
    }

    /// Commit `value` (usually the `MutableData` the block was given, after modifying it).
    public static func success(withValue value: MutableData) -> TransactionResult {
        TransactionResult(isSuccess: true, data: value)
    }

    /// Leave the data unchanged; the completion gets `committed == false` and no error.
    public static func abort() -> TransactionResult {
        TransactionResult(isSuccess: false, data: nil)
    }
}
