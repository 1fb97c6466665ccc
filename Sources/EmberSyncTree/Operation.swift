import EmberCore

/// Where an operation came from: a local write, the server, or the server for one tagged query.
struct OperationSource: Sendable {
    var fromUser: Bool
    var fromServer: Bool
    /// The view (query spec at the sync point) a tagged server operation is for.
    var queryId: QuerySpec?
    var tagged: Bool

    static let user = OperationSource(fromUser: true, fromServer: false, queryId: nil, tagged: false)
    static let server = OperationSource(fromUser: false, fromServer: true, queryId: nil, tagged: false)
    static func serverTaggedQuery(_ spec: QuerySpec) -> OperationSource {
        OperationSource(fromUser: false, fromServer: true, queryId: spec, tagged: true)
    }
}

/// A change to apply to the sync tree, with a path relative to the sync point it reaches.
enum Operation {
    case overwrite(OperationSource, Path, Node)
    case merge(OperationSource, Path, ImmutableTree<Node>)
    /// Removal of a local write: `affected` marks the written paths (root value = overwrite).
    case ackUserWrite(Path, affected: ImmutableTree<Bool>, revert: Bool)
    case listenComplete(OperationSource, Path)

    var source: OperationSource {
        switch self {
        case .overwrite(let s, _, _), .merge(let s, _, _), .listenComplete(let s, _): return s
        case .ackUserWrite: return .user
        }
    }

    var path: Path {
        switch self {
        case .overwrite(_, let p, _), .merge(_, let p, _), .ackUserWrite(let p, _, _), .listenComplete(_, let p):
            return p
        }
    }

    /// The operation as seen by the child `key` of the current location, or nil if it does not
    /// reach that child.
    func forChild(_ key: String) -> Operation? {
        switch self {
        case .overwrite(let source, let path, let node):
            if path.isRoot { return .overwrite(source, .root, node.immediateChild(key)) }
            return .overwrite(source, path.dropFirst, node)
        case .merge(let source, let path, let tree):
            if path.isRoot {
                let childTree = tree.subtree(Path(validated: [key]))
                if childTree.isEmpty { return nil }
                if let value = childTree.value { return .overwrite(source, .root, value) }
                return .merge(source, .root, childTree)
            }
            return .merge(source, path.dropFirst, tree)
        case .ackUserWrite(let path, let affected, let revert):
            if !path.isRoot { return .ackUserWrite(path.dropFirst, affected: affected, revert: revert) }
            if affected.value != nil { return self }
            return .ackUserWrite(.root, affected: affected.subtree(Path(validated: [key])), revert: revert)
        case .listenComplete(let source, let path):
            return .listenComplete(source, path.isRoot ? .root : path.dropFirst)
        }
    }
}
