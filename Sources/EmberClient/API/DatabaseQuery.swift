import EmberCore
import EmberSyncTree
import Foundation
import Synchronization

/// Misuse of the query builders (the SDK raises these as exceptions; the public builders stop
/// with a precondition failure, the `throwing` builders let tests check the message).
public struct QueryMisuseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// A location with ordering, range and limit (SDK `DatabaseQuery`). Immutable; each builder
/// returns a new query.
public class DatabaseQuery: @unchecked Sendable {
    public let database: Database
    let path: Path
    let spec: QuerySpec
    /// An order-by builder was called (the SDK allows only one).
    let orderExplicit: Bool

    init(database: Database, path: Path, spec: QuerySpec = .default, orderExplicit: Bool = false) {
        self.database = database
        self.path = path
        self.spec = spec
        self.orderExplicit = orderExplicit
    }

    var repo: Repo { database.repo }
    var syncQuery: SyncQuery { SyncQuery(path: path, spec: spec) }

    /// The location of this query, without ordering or filters.
    public var ref: DatabaseReference { DatabaseReference(database: database, path: path) }

    // MARK: - Observing

    @discardableResult
    public func observe(_ eventType: DataEventType, with block: @escaping @Sendable (DataSnapshot) -> Void) -> DatabaseHandle {
        observe(eventType, andPreviousSiblingKeyWith: { snap, _ in block(snap) }, withCancel: nil)
    }

    @discardableResult
    public func observe(_ eventType: DataEventType, with block: @escaping @Sendable (DataSnapshot) -> Void,
                        withCancel cancelBlock: (@Sendable (any Error) -> Void)?) -> DatabaseHandle {
        observe(eventType, andPreviousSiblingKeyWith: { snap, _ in block(snap) }, withCancel: cancelBlock)
    }

    /// The block also gets the key of the previous sibling in the query's order (nil for the first).
    @discardableResult
    public func observe(_ eventType: DataEventType,
                        andPreviousSiblingKeyWith block: @escaping @Sendable (DataSnapshot, String?) -> Void,
                        withCancel cancelBlock: (@Sendable (any Error) -> Void)? = nil) -> DatabaseHandle {
        let handle = repo.handles.allocate()
        repo.addObserver(Registration(handle: handle, query: syncQuery, eventType: eventType, onEvent: block, onCancel: cancelBlock))
        return handle
    }

    /// Calls `block` once, with cached data when the client has it complete, else after the server answers.
    public func observeSingleEvent(of eventType: DataEventType, with block: @escaping @Sendable (DataSnapshot) -> Void,
                                   withCancel cancelBlock: (@Sendable (any Error) -> Void)? = nil) {
        observeSingleEvent(of: eventType, andPreviousSiblingKeyWith: { snap, _ in block(snap) }, withCancel: cancelBlock)
    }

    public func observeSingleEvent(of eventType: DataEventType,
                                   andPreviousSiblingKeyWith block: @escaping @Sendable (DataSnapshot, String?) -> Void,
                                   withCancel cancelBlock: (@Sendable (any Error) -> Void)? = nil) {
        let repo = repo
        let handle = repo.handles.allocate()
        let once = OnceFlag()
        repo.addObserver(Registration(handle: handle, query: syncQuery, eventType: eventType, onEvent: { snap, prev in
            guard once.take() else { return }
            repo.removeObserver(handle)
            block(snap, prev)
        }, onCancel: cancelBlock))
    }

    public func observeSingleEvent(of eventType: DataEventType) async -> DataSnapshot {
        await withCheckedContinuation { cont in
            observeSingleEvent(of: eventType, with: { cont.resume(returning: $0) })
        }
    }

    public func removeObserver(withHandle handle: DatabaseHandle) { repo.removeObserver(handle) }

    /// Keeps this query's data synced (and cached) even without observers.
    public func keepSynced(_ keepSynced: Bool) { repo.keepSynced(syncQuery, keepSynced) }

    /// Removes the observers of this query (of this location, for a plain reference); observers of
    /// child locations stay.
    public func removeAllObservers() { repo.removeAllObservers(syncQuery) }

    /// The server's current data (falling back to the local cache when offline; error otherwise).
    /// The snapshot is never nil, as the seeds' `_Nonnull` block has it (`snapshot.exists()`):
    /// with an error it is an empty snapshot of the location.
    public func getData(completion: @escaping @Sendable ((any Error)?, DataSnapshot) -> Void) {
        let ref = ref
        let index = spec.index
        repo.get(syncQuery) { result in
            switch result {
            case .success(let node): completion(nil, DataSnapshot(node: node, ref: ref, index: index))
            case .failure(let error): completion(error, DataSnapshot(node: .empty, ref: ref, index: index))
            }
        }
    }

    public func getData() async throws -> DataSnapshot {
        try await awaitCompletion { done in
            getData { error, snap in
                if let error { done(.failure(error)) } else { done(.success(snap)) }
            }
        }
    }

    // MARK: - Builders (SDK names; each stops on misuse like the SDK's exceptions)

    public func queryOrdered(byChild key: String) -> DatabaseQuery { must { try throwingOrdered(byChild: key) } }
    public func queryOrderedByKey() -> DatabaseQuery { must { try throwingOrdered(by: .key) } }
    public func queryOrderedByValue() -> DatabaseQuery { must { try throwingOrdered(by: .value) } }
    public func queryOrderedByPriority() -> DatabaseQuery { must { try throwingOrdered(by: .priority) } }
    public func queryLimited(toFirst limit: UInt) -> DatabaseQuery { must { try throwingLimited(limit, fromStart: true) } }
    public func queryLimited(toLast limit: UInt) -> DatabaseQuery { must { try throwingLimited(limit, fromStart: false) } }

    public func queryStarting(atValue value: Any?, childKey: String? = nil) -> DatabaseQuery {
        must { try throwingStarting(value, childKey: childKey, after: false) }
    }
    public func queryStarting(afterValue value: Any?, childKey: String? = nil) -> DatabaseQuery {
        must { try throwingStarting(value, childKey: childKey, after: true) }
    }
    public func queryEnding(atValue value: Any?, childKey: String? = nil) -> DatabaseQuery {
        must { try throwingEnding(value, childKey: childKey, before: false) }
    }
    public func queryEnding(beforeValue value: Any?, childKey: String? = nil) -> DatabaseQuery {
        must { try throwingEnding(value, childKey: childKey, before: true) }
    }
    public func queryEqual(toValue value: Any?, childKey: String? = nil) -> DatabaseQuery {
        must { try throwingEqual(value, childKey: childKey) }
    }

    private func must(_ build: () throws -> DatabaseQuery) -> DatabaseQuery {
        do { return try build() } catch { preconditionFailure("\(error)") }
    }

    // MARK: - Throwing builders (the SDK's checks)

    public func throwingOrdered(byChild key: String) throws(QueryMisuseError) -> DatabaseQuery {
        if ["$key", ".key", "$value", ".value", "$priority", ".priority"].contains(key) {
            throw QueryMisuseError(message: "(queryOrderedBy:) \(key) is invalid; use queryOrderedByKey, queryOrderedByValue or queryOrderedByPriority instead")
        }
        guard let p = try? Path(key), !p.isRoot else {
            throw QueryMisuseError(message: "(queryOrderedBy:) Invalid path \"\(key)\": must be a non-empty path without . # $ [ ]")
        }
        return try throwingOrdered(by: .child(p))
    }

    public func throwingOrdered(by index: QueryIndex) throws(QueryMisuseError) -> DatabaseQuery {
        if orderExplicit {
            throw QueryMisuseError(message: "Cannot use multiple queryOrderedBy calls!")
        }
        var s = spec
        s.index = index
        try Self.validateBounds(s)
        return DatabaseQuery(database: database, path: path, spec: s, orderExplicit: true)
    }

    public func throwingLimited(_ limit: UInt, fromStart: Bool) throws(QueryMisuseError) -> DatabaseQuery {
        guard limit > 0 else {
            throw QueryMisuseError(message: "Limit can't be zero")
        }
        guard limit <= UInt(Int32.max) else { throw QueryMisuseError(message: "Limit is too large") }
        if spec.limit != nil {
            throw QueryMisuseError(message: "Can't call queryLimitedTo\(fromStart ? "First" : "Last") on a query that already has a limit")
        }
        let s = fromStart ? spec.limited(toFirst: Int(limit)) : spec.limited(toLast: Int(limit))
        return DatabaseQuery(database: database, path: path, spec: s, orderExplicit: orderExplicit)
    }

    public func throwingStarting(_ value: Any?, childKey: String?, after: Bool) throws(QueryMisuseError) -> DatabaseQuery {
        if spec.start != nil {
            throw QueryMisuseError(message: "Can't call queryStartingAtValue:, queryStartingAfterValue: or queryEqualToValue: multiple times")
        }
        let v = try Self.boundValue(value, childKey: childKey, index: spec.index)
        var s = after ? spec.starting(after: v, key: childKey) : spec.starting(at: v, key: childKey)
        if after, spec.index == .key, case .string(let k) = v {
            // Under the key index "after k" is "at k, exclusive".
            s.start = QueryBound(value: .string(k), name: nil, inclusive: false)
        }
        try Self.validateBounds(s)
        return DatabaseQuery(database: database, path: path, spec: s, orderExplicit: orderExplicit)
    }

    public func throwingEnding(_ value: Any?, childKey: String?, before: Bool) throws(QueryMisuseError) -> DatabaseQuery {
        if spec.end != nil {
            throw QueryMisuseError(message: "Can't call queryEndingAtValue:, queryEndingBeforeValue: or queryEqualToValue: multiple times")
        }
        let v = try Self.boundValue(value, childKey: childKey, index: spec.index)
        var s = before ? spec.ending(before: v, key: childKey) : spec.ending(at: v, key: childKey)
        if before, spec.index == .key, case .string(let k) = v {
            s.end = QueryBound(value: .string(k), name: nil, inclusive: false)
        }
        try Self.validateBounds(s)
        return DatabaseQuery(database: database, path: path, spec: s, orderExplicit: orderExplicit)
    }

    public func throwingEqual(_ value: Any?, childKey: String?) throws(QueryMisuseError) -> DatabaseQuery {
        if spec.start != nil || spec.end != nil {
            throw QueryMisuseError(message: "Can't call queryEqualToValue: after queryStartingAtValue:, queryEndingAtValue: or queryEqualToValue:")
        }
        let v = try Self.boundValue(value, childKey: childKey, index: spec.index)
        let s = spec.equal(to: v, key: childKey)
        try Self.validateBounds(s)
        return DatabaseQuery(database: database, path: path, spec: s, orderExplicit: orderExplicit)
    }

    private static func boundValue(_ value: Any?, childKey: String?, index: QueryIndex) throws(QueryMisuseError) -> IndexValue {
        let json: JSON
        do { json = try ValueConverter.json(from: value) } catch {
            throw QueryMisuseError(message: "Cannot use \(type(of: value)) as a query bound")
        }
        guard let v = IndexValue(json: json) else {
            throw QueryMisuseError(message: "Cannot use an object or array as a query bound; only strings, numbers, booleans and nil")
        }
        if let childKey, !Key.isValid(childKey), childKey != KeyOrder.minName, childKey != KeyOrder.maxName {
            throw QueryMisuseError(message: "Invalid childKey \"\(childKey)\"")
        }
        return v
    }

    /// The SDK's index/bound compatibility checks.
    static func validateBounds(_ s: QuerySpec) throws(QueryMisuseError) {
        let bounds = [s.start, s.end].compactMap { $0 }
        switch s.index {
        case .key:
            for b in bounds {
                guard case .string = b.value else {
                    throw QueryMisuseError(message: "Can't use queryStartingAtValue:, queryEndingAtValue: or queryEqualToValue: with non-string values when ordered by key")
                }
                if let n = b.name, n != KeyOrder.minName, n != KeyOrder.maxName {
                    throw QueryMisuseError(message: "Can't use queryStartingAtValue:childKey:, queryEndingAtValue:childKey: or queryEqualToValue:childKey: in combination with queryOrderedByKey")
                }
            }
        case .priority:
            for b in bounds {
                if case .bool = b.value {
                    throw QueryMisuseError(message: "Can't use booleans as query bounds when ordered by priority")
                }
            }
        default: break
        }
    }
}

/// Lets exactly one caller through (single-event observers).
final class OnceFlag: Sendable {
    private let taken = Atomic<Bool>(false)
    func take() -> Bool { !taken.exchange(true, ordering: .relaxed) }
}
