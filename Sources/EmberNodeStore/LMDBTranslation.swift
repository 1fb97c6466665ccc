import EmberCore
import EmberStorage

/// The ports' values as EmberStorage's and back, and storage errors as the ports' errors:
/// shared by the single-node implementations here and EmberCluster's replicated one, which logs
/// the same operations through Raft.
public enum LMDBTranslation {
    /// The storage operation a front write request becomes.
    public static func operation(for request: WriteRequest) -> WriteOperation {
        let condition: EmberStorage.WriteCondition? = request.condition.map {
            switch $0 {
            case .dataVersion(let v): return .ifDataVersion(v)
            case .version(let v): return .ifVersion(v)
            case .hash(let h): return .ifHash(h)
            }
        }
        return operation(path: request.path, kind: request.kind, condition: condition)
    }

    static func operation(path: Path, kind: WriteRequest.Kind, condition: EmberStorage.WriteCondition? = nil) -> WriteOperation {
        switch kind {
        case .set(let json): return .set(path: path, value: json, condition: condition)
        case .update(let parts): return .update(path: path, values: parts, condition: condition)
        case .updateText(let text, _): return .updateText(path: path, parts: text, condition: condition)
        }
    }

    public static func stamp(_ s: WriteStamp?) -> WriterStamp? { s.map { WriterStamp(writer: $0.writer, seq: $0.seq) } }

    public static func session(_ r: OnDisconnectRef) -> OnDisconnectSession {
        OnDisconnectSession(node: r.node, incarnation: r.incarnation, id: r.id)
    }

    static func ref(_ s: OnDisconnectSession) -> OnDisconnectRef {
        OnDisconnectRef(node: s.node, incarnation: s.incarnation, id: s.id)
    }

    /// The log's form of an onDisconnect command.
    public static func operation(for command: OnDisconnectCommand) -> OnDisconnectOperation {
        switch command {
        case .holder(let node, let inc): return .holder(node: node, incarnation: inc)
        case .seal(let node, let inc): return .seal(node: node, incarnation: inc)
        case .register(let s, let w): return .register(session: session(s), write: operation(path: w.path, kind: w.kind))
        case .cancel(let s, let path): return .cancel(session: session(s), path: path)
        case .run(let s): return .run(session: session(s))
        }
    }

    static let onDisconnectNamespace = OnDisconnectTable.namespace

    static func cancelOnDisconnect(_ writes: [OnDisconnectWrite], at path: Path) -> [OnDisconnectWrite] {
        OnDisconnectCancel.apply(writes.map { operation(path: $0.path, kind: $0.kind) }, cancel: path).compactMap { op in
            switch op {
            case .set(let p, let v, _)?: return OnDisconnectWrite(path: p, kind: .set(v))
            case .update(let p, let parts, _)?: return OnDisconnectWrite(path: p, kind: .update(parts))
            default: return nil
            }
        }
    }

    static func rules(_ r: StoredRules?) -> NamespaceRules? { r.map { NamespaceRules(text: $0.text, engine: $0.engine) } }

    /// The front's answer for an applied entry (on a replica: the local apply's result).
    public static func outcome(of result: WriteResult) throws -> WriteOutcome {
        switch result.outcome {
        case .applied, .noop:
            // For a set this is the value now at the path; for an update, the resolved parts
            // at their relative paths (what REST echoes for PATCH), built when read if the
            // apply built no node.
            if let patch = result.textPatch {
                return WriteOutcome(index: result.index, valueFrom: patch, version: result.version, duplicate: result.duplicate)
            }
            return WriteOutcome(index: result.index, applied: true, value: result.value, version: result.version,
                                duplicate: result.duplicate)
        case .conditionFailed(let current, let version):
            return WriteOutcome(index: result.index, applied: false, value: current, version: version)
        case .rejected(let e):
            throw translate(e)
        case .denied:
            throw PermissionDenied()
        }
    }

    /// False: a `register` whose incarnation no longer holds its node's sessions.
    public static func onDisconnectOutcome(_ result: WriteResult) throws -> Bool {
        switch result.outcome {
        case .conditionFailed: return false
        case .rejected(let e): throw translate(e)
        case .denied: throw PermissionDenied()
        case .applied, .noop: return true
        }
    }

    /// The store's own namespaces (onDisconnect bookkeeping, the log's record of writers):
    /// clients never read or write them.
    public static func refuseReserved(_ namespace: String) throws {
        if namespace == OnDisconnectTable.namespace {
            throw StoreRefusal.forbidden("Namespace \(namespace) is reserved for onDisconnect bookkeeping")
        }
        if namespace == WriterTable.namespace {
            throw StoreRefusal.forbidden("Namespace \(namespace) is reserved for the log's record of writers (exactly-once)")
        }
    }

    /// Storage errors as client errors: bad input is 400, a full queue is 503 (retryable).
    public static func translate(_ e: StorageError) -> Error {
        switch e {
        case .invalid(let inner): return inner
        case .queueFull, .closed, .tooManyStreams: return StoreUnavailable("\(e)")
        case .invalidNamespace, .entryTooLarge, .tooManyIndexes, .invalidRules, .readTooLarge:
            return StoreRefusal.badRequest("\(e)")
        case .lmdb where SpaceGuard.isNoSpace(e):
            return StoreRefusal.noSpace("the write did not fit (\(e)); free space or raise --max-db-size")
        default: return e
        }
    }

    /// Runs `body`, its storage errors translated.
    static func translating<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as StorageError { throw translate(e) }
    }
}

extension WriteStamp {
    /// A stamp from outside (the wire): nil unless the id is 1–64 of `A–Z a–z 0–9 - _` and the
    /// sequence number is positive.
    public init?(validating writer: String, seq: Int64) {
        guard let s = WriterStamp(validating: writer, seq: seq) else { return nil }
        self.init(writer: s.writer, seq: s.seq)
    }
}
