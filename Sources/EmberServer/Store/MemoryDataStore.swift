import EmberCore
import Logging
import Synchronization

/// An in-memory `DataStore` with the same write semantics as the durable store: the reference
/// model that tests compare the LMDB store against, and an ephemeral node for experiments.
public final class MemoryDataStore: DataStore {
    struct State {
        var trees: [String: Node] = [:]
        var sub: [String: [Path: UInt64]] = [:]
        var at: [String: [Path: UInt64]] = [:]
        var index: UInt64 = 0
        var handlers: [@Sendable (CommittedChange) -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var appliedIndex: UInt64 { state.withLock { $0.index } }

    public func read(namespace: String, path: Path) throws -> ReadResult {
        state.withLock { s in
            let node = (s.trees[namespace] ?? .empty).child(at: path)
            return ReadResult(node: node, version: Self.version(s, namespace, path), appliedIndex: s.index)
        }
    }

    public func query(namespace: String, path: Path, query: QuerySpec) async throws -> ReadResult {
        var r = try read(namespace: namespace, path: path)
        r.node = query.apply(to: r.node)
        return r
    }

    public func setIndexes(_ defs: [IndexDefinition]) throws {}

    public func onCommit(_ handler: @escaping @Sendable (CommittedChange) -> Void) {
        state.withLock { $0.handlers.append(handler) }
    }

    public func close() {}

    static func version(_ s: State, _ ns: String, _ path: Path) -> UInt64 {
        var v = s.sub[ns]?[path] ?? 0
        var p: Path? = path
        while let cur = p {
            v = max(v, s.at[ns]?[cur] ?? 0)
            p = cur.parent
        }
        return v
    }

    public func write(_ request: WriteRequest, now: Int64) async throws -> WriteOutcome {
        let outcome = try state.withLock { s -> WriteOutcome in
            let ns = request.namespace
            var tree = s.trees[ns] ?? .empty
            let current = tree.child(at: request.path)
            s.index += 1
            let index = s.index
            let version = Self.version(s, ns, request.path)
            if let c = request.condition {
                let ok: Bool
                switch c {
                case .etag(let e): ok = e == ETag.of(node: current, version: version)
                case .version(let v): ok = v == version
                case .hash(let h): ok = h == current.firebaseHash
                }
                if !ok { return WriteOutcome(index: index, applied: false, value: current, version: version) }
            }
            var parts: [(Path, Node)] = []
            let kind: CommittedChange.Kind
            switch request.kind {
            case .set(let json):
                let node = try Node(json: ServerValues.resolve(json, existing: current, now: now), depth: request.path.count)
                parts = [(request.path, node)]
                kind = .set(node)
            case .update(let items):
                var resolved: [(Path, Node)] = []
                for (rel, json) in items {
                    let abs = request.path.appending(rel)
                    let node = try Node(json: ServerValues.resolve(json, existing: tree.child(at: abs), now: now), depth: abs.count)
                    resolved.append((rel, node))
                    parts.append((abs, node))
                }
                kind = .merge(resolved)
            }
            var changed = false
            for (abs, node) in parts where !tree.child(at: abs).isIdentical(to: node) {
                changed = true
                tree.set(node, at: abs)
                s.at[ns, default: [:]][abs] = index
                var p: Path? = abs
                while let cur = p { s.sub[ns, default: [:]][cur] = index; p = cur.parent }
            }
            s.trees[ns] = tree
            let after = tree.child(at: request.path)
            let out = WriteOutcome(index: index, applied: true, value: after, version: Self.version(s, ns, request.path))
            // Handlers run under the lock so listeners see changes in commit order.
            if changed {
                let change = CommittedChange(index: index, namespace: ns, path: request.path, kind: kind)
                for h in s.handlers { h(change) }
            }
            return out
        }
        return outcome
    }
}


