import EmberCore
import Foundation

/// The data a transaction block reads and modifies (SDK `MutableData`). Children obtained with
/// `childData(byAppendingPath:)` write through to the same tree. Used only inside the block,
/// on the client's internal queue. Server values (`ServerValue.timestamp()`, `increment`) read
/// back as local estimates and are sent to the server unresolved.
public final class MutableData: CustomStringConvertible {
    final class Box {
        /// The block's writes as written (export-format JSON, server values unresolved).
        var raw: JSON
        /// The value the transaction started from (what increments resolve against).
        let input: Node
        let now: Int64
        init(input: Node, now: Int64) {
            raw = input.exportJSON()
            self.input = input
            self.now = now
        }

        /// `raw` with server values estimated.
        var resolved: Node {
            guard let json = try? ServerValues.resolve(raw, existing: input, now: now) else { return .empty }
            return (try? Node(json: json)) ?? .empty
        }
    }

    private let box: Box
    private let path: Path

    init(node: Node, now: Int64) {
        box = Box(input: node, now: now)
        path = .root
    }

    private init(box: Box, path: Path) {
        self.box = box
        self.path = path
    }

    /// The result with server values estimated (applied locally).
    var root: Node { box.resolved }
    /// The result as written (sent to the server).
    var rawRoot: JSON { box.raw }
    private var node: Node { root.child(at: path) }
    /// The value at this location, server values estimated (what `value` reads).
    var currentNode: Node { node }

    /// Read: see `DataSnapshot.value`. Write: the same types `setValue` accepts; invalid data
    /// is a programming error, as in the SDK.
    public var value: Any? {
        get { ValueConverter.value(of: node) }
        set {
            do {
                let json = try ValueConverter.json(from: newValue)
                // Validate now (keys, depth), with server values estimated.
                _ = try Node(json: ServerValues.resolve(json, existing: node, now: box.now), depth: path.count)
                box.raw = Self.setting(box.raw, at: path.segments[...], json)
            } catch {
                preconditionFailure("Invalid value for MutableData: \(error)")
            }
        }
    }

    public var priority: Any? {
        get { ValueConverter.priorityValue(node.priority) }
        set {
            do { setPriority(json: try ValueConverter.priorityJSON(newValue)) } catch {
                preconditionFailure("Invalid priority for MutableData: \(error)")
            }
        }
    }

    /// Sets the priority (a number, string or null); no effect on missing data.
    func setPriority(json p: JSON) {
        let current = Self.child(box.raw, at: path.segments[...])
        let updated: JSON
        switch current {
        case .null: return
        case .object(var o) where o[".sv"] == nil && o[".value"] == nil:
            o[".priority"] = p.isNull ? nil : p
            updated = .object(o)
        case .object(let o) where o[".value"] != nil:
            updated = p.isNull ? o[".value"]! : .object([".value": o[".value"]!, ".priority": p])
        default:
            updated = p.isNull ? current : .object([".value": current, ".priority": p])
        }
        box.raw = Self.setting(box.raw, at: path.segments[...], updated)
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
        return MutableData(box: box, path: self.path.appending(p))
    }

    /// Direct children in priority order, enumerated like the SDK's `NSEnumerator`.
    public var children: DatabaseEnumerator<MutableData> {
        DatabaseEnumerator(QuerySpec.default.sortedChildren(of: node).map { MutableData(box: box, path: path.child($0.key)) })
    }

    public var description: String { "MutableData (\(key ?? "")) \(node.exportJSON().serialized())" }

    // MARK: - Raw JSON edits

    /// The children of a raw value as an object (arrays by index; a leaf has none).
    private static func object(_ json: JSON) -> KeyMap<JSON> {
        switch json {
        case .object(let o) where o[".value"] == nil && o[".sv"] == nil: return o
        case .object(let o) where o[".value"] != nil:
            // Writing under a leaf turns it into an object that keeps its priority.
            return o[".priority"].map { [".priority": $0] } ?? [:]
        case .array(let a):
            var o: KeyMap<JSON> = [:]
            for (i, v) in a.enumerated() where !v.isNull { o[String(i)] = v }
            return o
        default: return [:]
        }
    }

    static func setting(_ root: JSON, at path: ArraySlice<String>, _ value: JSON) -> JSON {
        guard let key = path.first else { return value }
        var o = object(root)
        o[key] = setting(o[key] ?? .null, at: path.dropFirst(), value)
        return .object(o)
    }

    static func child(_ root: JSON, at path: ArraySlice<String>) -> JSON {
        guard let key = path.first else { return root }
        return child(object(root)[key] ?? .null, at: path.dropFirst())
    }
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
