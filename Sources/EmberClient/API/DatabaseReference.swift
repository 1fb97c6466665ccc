import EmberCore
import Foundation

/// A location in the database (SDK `DatabaseReference`): navigation and writes. Writes apply
/// locally at once (observers fire immediately) and reach the server in the order they were made.
public final class DatabaseReference: DatabaseQuery, @unchecked Sendable, CustomStringConvertible {
    init(database: Database, path: Path) {
        super.init(database: database, path: path)
    }

    /// The last path segment; nil at the root.
    public var key: String? { path.last }

    public var parent: DatabaseReference? { path.parent.map { DatabaseReference(database: database, path: $0) } }

    public var root: DatabaseReference { DatabaseReference(database: database, path: .root) }

    /// The location as a URL: the database URL with this path (`http://host:port/a/b?ns=x`).
    public var url: String {
        guard var c = URLComponents(string: database.url) else { return database.url }
        c.path = path.segments.isEmpty ? "" : path.description
        return c.string ?? database.url
    }

    public var description: String { path.description }

    /// A reference to a relative path ("a", "a/b").
    public func child(_ pathString: String) -> DatabaseReference {
        do { return DatabaseReference(database: database, path: try Database.parsePath(pathString, under: path)) } catch {
            preconditionFailure("(child:) Invalid path \"\(pathString)\": \(error)")
        }
    }

    func child(atPath rel: Path) -> DatabaseReference { DatabaseReference(database: database, path: path.appending(rel)) }

    /// A new child with a push id: time-ordered (server-offset-corrected clock), unique.
    public func childByAutoId() -> DatabaseReference { child(atPath: Path(validated: [repo.nextPushID()])) }

    // MARK: - Writes

    public func setValue(_ value: Any?) { setValue(value, andPriority: nil, withCompletionBlock: nil) }

    public func setValue(_ value: Any?, withCompletionBlock block: @escaping @Sendable ((any Error)?, DatabaseReference) -> Void) {
        setValue(value, andPriority: nil, withCompletionBlock: block)
    }

    public func setValue(_ value: Any?, andPriority priority: Any?) {
        setValue(value, andPriority: priority, withCompletionBlock: nil)
    }

    public func setValue(_ value: Any?, andPriority priority: Any?,
                         withCompletionBlock block: (@Sendable ((any Error)?, DatabaseReference) -> Void)?) {
        let completion = wrap(block)
        do {
            let json = try ValueConverter.json(value: value, priority: priority)
            repo.set(json, at: path, completion: completion)
        } catch {
            fail(error, completion)
        }
    }

    public func setValue(_ value: Any?, andPriority priority: Any? = nil) async throws {
        try await withCompletion { setValue(value, andPriority: priority, withCompletionBlock: $0) }
    }

    public func removeValue() { setValue(nil) }

    public func removeValue(completionBlock block: @escaping @Sendable ((any Error)?, DatabaseReference) -> Void) {
        setValue(nil, withCompletionBlock: block)
    }

    public func removeValue() async throws { try await setValue(nil) }

    public func setPriority(_ priority: Any?) { setPriority(priority, withCompletionBlock: nil) }

    public func setPriority(_ priority: Any?, withCompletionBlock block: (@Sendable ((any Error)?, DatabaseReference) -> Void)?) {
        let completion = wrap(block)
        do { repo.setPriority(try ValueConverter.priorityJSON(priority), at: path, completion: completion) } catch {
            fail(error, completion)
        }
    }

    public func setPriority(_ priority: Any?) async throws {
        try await withCompletion { setPriority(priority, withCompletionBlock: $0) }
    }

    /// Writes several relative paths at once, atomically (`nil` deletes). Keys may be deep paths.
    public func updateChildValues(_ values: [AnyHashable: Any]) { updateChildValues(values, withCompletionBlock: nil) }

    public func updateChildValues(_ values: [AnyHashable: Any],
                                  withCompletionBlock block: (@Sendable ((any Error)?, DatabaseReference) -> Void)?) {
        let completion = wrap(block)
        do { repo.update(try Self.parseUpdate(values, at: path), at: path, completion: completion) } catch {
            fail(error, completion)
        }
    }

    public func updateChildValues(_ values: [AnyHashable: Any]) async throws {
        nonisolated(unsafe) let values = values
        try await withCompletion { updateChildValues(values, withCompletionBlock: $0) }
    }

    /// Validates an update: string keys that are valid paths, none an ancestor of another.
    static func parseUpdate(_ values: [AnyHashable: Any], at base: Path) throws(DatabaseError) -> [(Path, JSON)] {
        var parts: [(Path, JSON)] = []
        for (k, v) in values {
            guard let key = k.base as? String else { throw DatabaseError(code: .invalidData, message: "Update keys must be strings") }
            let rel: Path
            do { rel = try Path(key) } catch { throw DatabaseError(code: .invalidData, message: "(updateChildValues:) Invalid key \"\(key)\": \(error)") }
            guard !rel.isRoot else { throw DatabaseError(code: .invalidData, message: "(updateChildValues:) Empty key") }
            guard base.count + rel.count <= Limits.maxPathDepth else { throw DatabaseError.invalid(EmberError.pathTooDeep(depth: base.count + rel.count)) }
            parts.append((rel, try ValueConverter.json(from: v)))
        }
        parts.sort { $0.0 < $1.0 }
        for i in parts.indices.dropFirst() where parts[i - 1].0.contains(parts[i].0) {
            throw DatabaseError(code: .invalidData,
                                message: "(updateChildValues:) Path \(parts[i - 1].0) is an ancestor of \(parts[i].0) in the same update")
        }
        return parts
    }

    // MARK: - Transactions

    /// Runs `block` on the client's last known value and commits the result with a compare-and-set;
    /// reruns on newer data up to 25 times. `block` runs on the client's internal queue.
    public func runTransactionBlock(_ block: @escaping @Sendable (MutableData) -> TransactionResult) {
        runTransactionBlock(block, andCompletionBlock: nil, withLocalEvents: true)
    }

    public func runTransactionBlock(_ block: @escaping @Sendable (MutableData) -> TransactionResult,
                                    andCompletionBlock completion: (@Sendable ((any Error)?, Bool, DataSnapshot?) -> Void)?) {
        runTransactionBlock(block, andCompletionBlock: completion, withLocalEvents: true)
    }

    /// `withLocalEvents: false` keeps intermediate states from firing local events.
    public func runTransactionBlock(_ block: @escaping @Sendable (MutableData) -> TransactionResult,
                                    andCompletionBlock completion: (@Sendable ((any Error)?, Bool, DataSnapshot?) -> Void)?,
                                    withLocalEvents: Bool) {
        repo.startTransaction(at: path, update: block, onComplete: completion, applyLocally: withLocalEvents)
    }

    /// Async form: returns `(committed, snapshot)`; throws the transaction's error.
    public func runTransactionBlock(_ block: @escaping @Sendable (MutableData) -> TransactionResult,
                                    withLocalEvents: Bool = true) async throws -> (committed: Bool, snapshot: DataSnapshot) {
        let (committed, snapshot): (Bool, DataSnapshot) = try await awaitCompletion { done in
            runTransactionBlock(block, andCompletionBlock: { error, committed, snap in
                if let error { done(.failure(error)) } else { done(.success((committed, snap!))) }
            }, withLocalEvents: withLocalEvents)
        }
        return (committed, snapshot)
    }

    // MARK: - Helpers

    private func wrap(_ block: (@Sendable ((any Error)?, DatabaseReference) -> Void)?) -> Repo.WriteCompletion? {
        guard let block else { return nil }
        return { [self] error in block(error, self) }
    }

    private func fail(_ error: any Error, _ completion: Repo.WriteCompletion?) {
        guard let completion else { return }
        repo.deliver { completion(error) }
    }

    func withCompletion(_ start: (@escaping @Sendable ((any Error)?, DatabaseReference) -> Void) -> Void) async throws {
        try await awaitCompletion { (done: @escaping @Sendable (Result<Void, any Error>) -> Void) in
            start { error, _ in done(error.map { .failure($0) } ?? .success(())) }
        }
    }
}
