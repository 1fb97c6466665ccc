import EmberCore
import EmberProtocol
import Foundation

/// Operations the server performs when this client's connection drops (reference §6.9).
extension DatabaseReference {
    public func onDisconnectSetValue(_ value: Any?, andPriority priority: Any? = nil,
                                     withCompletionBlock block: (@Sendable ((any Error)?, DatabaseReference) -> Void)? = nil) {
        do {
            let json = try ValueConverter.json(value: value, priority: priority)
            repo.onDisconnect("o", at: path, data: json, completion: completion(block))
        } catch {
            if let block { repo.deliver { block(error, self) } }
        }
    }

    public func onDisconnectRemoveValue(withCompletionBlock block: (@Sendable ((any Error)?, DatabaseReference) -> Void)? = nil) {
        repo.onDisconnect("o", at: path, data: .null, completion: completion(block))
    }

    public func onDisconnectUpdateChildValues(_ values: [AnyHashable: Any],
                                              withCompletionBlock block: (@Sendable ((any Error)?, DatabaseReference) -> Void)? = nil) {
        do {
            var obj: KeyMap<JSON> = [:]
            for (rel, json) in try Self.parseUpdate(values, at: path) { obj[rel.wireText] = json }
            repo.onDisconnect("om", at: path, data: .object(obj), completion: completion(block))
        } catch {
            if let block { repo.deliver { block(error, self) } }
        }
    }

    public func cancelDisconnectOperations(withCompletionBlock block: (@Sendable ((any Error)?, DatabaseReference) -> Void)? = nil) {
        repo.onDisconnect("oc", at: path, data: .null, completion: completion(block))
    }

    public func onDisconnectSetValue(_ value: Any?, andPriority priority: Any? = nil) async throws {
        nonisolated(unsafe) let value = value, priority = priority
        try await withCompletion { onDisconnectSetValue(value, andPriority: priority, withCompletionBlock: $0) }
    }

    public func onDisconnectRemoveValue() async throws {
        try await withCompletion { onDisconnectRemoveValue(withCompletionBlock: $0) }
    }

    public func onDisconnectUpdateChildValues(_ values: [AnyHashable: Any]) async throws {
        nonisolated(unsafe) let values = values
        try await withCompletion { onDisconnectUpdateChildValues(values, withCompletionBlock: $0) }
    }

    public func cancelDisconnectOperations() async throws {
        try await withCompletion { cancelDisconnectOperations(withCompletionBlock: $0) }
    }

    private func completion(_ block: (@Sendable ((any Error)?, DatabaseReference) -> Void)?) -> Repo.WriteCompletion? {
        guard let block else { return nil }
        return { [self] error in block(error, self) }
    }
}
