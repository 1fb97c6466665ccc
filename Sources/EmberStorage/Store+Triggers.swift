import EmberCore

/// One trigger as the fronts and the delivery worker read it: its definition and replicated state.
public struct TriggerView: Sendable {
    public let definition: TriggerDefinition
    public let state: TriggerState
}

extension EmberStore {
    /// The checks of a trigger entry before it is logged: a definitions document that loads,
    /// names and reasons within their limits.
    static func checkTriggers(_ op: TriggerOperation) throws {
        func bad(_ why: String) -> StorageError { .invalid(.invalidData("triggers: \(why)")) }
        switch op {
        case .define(let text):
            do { _ = try TriggerSet(text: text) } catch { throw bad(error.reason) }
        case .settle(let name, let indexes, let reason):
            guard indexes.count <= TriggerOperation.maxSettle else { throw bad("at most \(TriggerOperation.maxSettle) entries per settle") }
            try checkName(name)
            if let reason, reason.utf8.count > TriggerOperation.maxReasonBytes { throw bad("reason too long") }
        case .halt(let name, let reason):
            try checkName(name)
            if reason.utf8.count > TriggerOperation.maxReasonBytes { throw bad("reason too long") }
        case .pause(let name), .resume(let name), .replay(let name, _):
            try checkName(name)
        }
        func checkName(_ n: String) throws {
            guard !n.isEmpty, n.utf8.count <= TriggerDefinition.maxNameBytes else { throw bad("bad trigger name") }
        }
    }

    /// The namespace's triggers in force (committed on this node).
    public func triggerSet(namespace: String) throws -> TriggerSet {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in try tables.triggerSet(t, namespace) }
    }

    /// Namespaces that have triggers.
    public func triggerNamespaces() throws -> [String] {
        try withVisibleRead { t in Array(try tables.allTriggerSets(t).keys).sorted() }
    }

    /// Each trigger of the namespace with its state, by name.
    public func triggers(namespace: String) throws -> [TriggerView] {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in
            try tables.triggerSet(t, namespace).definitions.map { d in
                TriggerView(definition: d, state: try tables.triggerState(t, namespace, d.name) ?? TriggerState())
            }
        }
    }

    /// One trigger's replicated state (nil: no such trigger), without reading the definitions: a
    /// delivery lane checks it on every turn, and parsing the whole set each time cost the
    /// leader's writes (every commit wakes every lane).
    public func triggerState(namespace: String, name: String) throws -> TriggerState? {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in try tables.triggerState(t, namespace, name) }
    }

    /// Outbox rows of a trigger after log index `after` (nil: from the oldest), at most `limit`.
    public func triggerOutbox(namespace: String, trigger: String, after: UInt64?, limit: Int) throws -> [(index: UInt64, events: [TriggerEvent])] {
        try withVisibleRead { t in
            try tables.triggerRows(t, prefix: TriggerKeys.outboxPrefix(namespace, trigger), after: after, limit: limit).map { ($0.index, $0.events) }
        }
    }

    /// Dead letters of a trigger (oldest first), at most `limit`.
    public func triggerDeadLetters(namespace: String, trigger: String, limit: Int) throws -> [(index: UInt64, reason: String, events: [TriggerEvent])] {
        try withVisibleRead { t in
            try tables.triggerRows(t, prefix: TriggerKeys.deadPrefix(namespace, trigger), after: nil, limit: limit).map { ($0.index, $0.reason ?? "", $0.events) }
        }
    }
}
