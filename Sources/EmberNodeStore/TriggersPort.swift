import EmberCore
import EmberStorage

/// One trigger with its replicated state, as the fronts and the delivery worker read it.
public struct TriggerInfo: Sendable {
    public let definition: TriggerDefinition
    public let state: TriggerState
}

/// Database triggers (issue 36): definitions and delivery bookkeeping go through the log
/// (`TriggerOperation`), read from this node's applied state.
public protocol TriggersPort: Sendable {
    /// Logs a trigger entry (admin). Bad definitions: 400 with the reason, nothing logged.
    func log(namespace: String, _ operation: TriggerOperation) async throws
    func definitions(namespace: String) throws -> TriggerSet
    func triggers(namespace: String) throws -> [TriggerInfo]
    /// One trigger's state alone (nil: no such trigger): what a delivery lane checks each turn.
    func state(namespace: String, trigger: String) throws -> TriggerState?
    /// Namespaces that have triggers.
    func namespaces() throws -> [String]
    /// Outbox rows (one per log entry) after `after` (nil: from the oldest), at most `limit`.
    func outbox(namespace: String, trigger: String, after: UInt64?, limit: Int) throws -> [(index: UInt64, events: [TriggerEvent])]
    /// `outbox` with each row's source and the group read: what the delivery worker's cursor
    /// entries (`TriggerOperation.advance`) name.
    func read(namespace: String, trigger: String, after: UInt64?, limit: Int) throws -> TriggerOutboxRead
    /// `state` and `read` for a delivery lane: they may answer before this node's last apply
    /// commits (its entries are committed in Raft), with what they return once it has
    /// (`EmberStore.triggerDeliveryRead`). `floor`: every shared record through it was delivered
    /// and its cursor logged by the lane.
    func deliveryState(namespace: String, trigger: String) throws -> TriggerState?
    func deliveryRead(namespace: String, trigger: String, after: UInt64?, limit: Int, floor: UInt64) throws -> TriggerOutboxRead
    func deadLetters(namespace: String, trigger: String, limit: Int) throws -> [(index: UInt64, reason: String, events: [TriggerEvent])]
    /// Whether this node delivers (a single node always; a cluster member while it leads).
    var delivers: Bool { get }
    /// Whether delivered cursors may be logged as one `advance` entry per namespace: every
    /// member reads it (peer level 4). Otherwise each lane logs 0.6.0's `settle` entries,
    /// which name every delivered entry (a 0.6.0 member drops its outbox rows by them).
    var logsAdvance: Bool { get }
    /// Called after every storage commit (the worker looks for new events).
    func onCommit(_ handler: @escaping @Sendable () -> Void)
    /// `onCommit`, told which delivery lanes the commit may have given something to read
    /// (`TriggerCommit`): the worker wakes only those.
    func onTriggerCommit(_ handler: @escaping @Sendable (TriggerCommit) -> Void)
}

extension TriggersPort {
    /// A port with no early reads: the committed state, as the fronts read it.
    public func deliveryState(namespace: String, trigger: String) throws -> TriggerState? {
        try state(namespace: namespace, trigger: trigger)
    }

    public func deliveryRead(namespace: String, trigger: String, after: UInt64?, limit: Int, floor: UInt64) throws -> TriggerOutboxRead {
        try read(namespace: namespace, trigger: trigger, after: after, limit: limit)
    }

    /// A port that cannot tell: every commit reaches every lane.
    public func onTriggerCommit(_ handler: @escaping @Sendable (TriggerCommit) -> Void) {
        onCommit { handler(.all) }
    }
}

/// The triggers port of an LMDB store: entries straight into the store on a single node; a
/// cluster member proposes them through Raft (`log`) and delivers while it leads.
public struct LMDBTriggers: TriggersPort {
    let store: EmberStore
    let logEntry: @Sendable (_ namespace: String, _ operation: TriggerOperation) async throws -> Void
    let isLeader: @Sendable () -> Bool
    let advance: @Sendable () -> Bool

    public init(store: EmberStore, log: (@Sendable (String, TriggerOperation) async throws -> Void)? = nil,
                isLeader: @escaping @Sendable () -> Bool = { true }, logsAdvance: @escaping @Sendable () -> Bool = { true }) {
        self.store = store
        self.isLeader = isLeader
        self.advance = logsAdvance
        self.logEntry = log ?? { namespace, op in
            try LMDBTranslation.refuseReserved(namespace)
            let result: WriteResult
            do { result = try await store.submit(namespace: namespace, .triggers(op)) } catch let e as StorageError {
                throw LMDBTranslation.translate(e)
            }
            if case .rejected(let e) = result.outcome { throw LMDBTranslation.translate(e) }
        }
    }

    public func log(namespace: String, _ operation: TriggerOperation) async throws { try await logEntry(namespace, operation) }

    func translated<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as StorageError { throw LMDBTranslation.translate(e) }
    }

    public func definitions(namespace: String) throws -> TriggerSet { try translated { try store.triggerSet(namespace: namespace) } }

    public func triggers(namespace: String) throws -> [TriggerInfo] {
        try translated { try store.triggers(namespace: namespace).map { TriggerInfo(definition: $0.definition, state: $0.state) } }
    }

    public func state(namespace: String, trigger: String) throws -> TriggerState? {
        try translated { try store.triggerState(namespace: namespace, name: trigger) }
    }

    public func namespaces() throws -> [String] { try translated { try store.triggerNamespaces() } }

    public func outbox(namespace: String, trigger: String, after: UInt64?, limit: Int) throws -> [(index: UInt64, events: [TriggerEvent])] {
        try translated { try store.triggerOutbox(namespace: namespace, trigger: trigger, after: after, limit: limit) }
    }

    public func read(namespace: String, trigger: String, after: UInt64?, limit: Int) throws -> TriggerOutboxRead {
        try translated { try store.triggerOutboxRead(namespace: namespace, trigger: trigger, after: after, limit: limit) }
    }

    public func deliveryState(namespace: String, trigger: String) throws -> TriggerState? {
        try translated { try store.triggerDeliveryState(namespace: namespace, name: trigger) }
    }

    public func deliveryRead(namespace: String, trigger: String, after: UInt64?, limit: Int, floor: UInt64) throws -> TriggerOutboxRead {
        try translated { try store.triggerDeliveryRead(namespace: namespace, trigger: trigger, after: after, limit: limit, floor: floor) }
    }

    public func deadLetters(namespace: String, trigger: String, limit: Int) throws -> [(index: UInt64, reason: String, events: [TriggerEvent])] {
        try translated { try store.triggerDeadLetters(namespace: namespace, trigger: trigger, limit: limit) }
    }

    public var delivers: Bool { isLeader() }

    public var logsAdvance: Bool { advance() }

    public func onCommit(_ handler: @escaping @Sendable () -> Void) {
        store.onCommit { _ in handler() }
    }

    public func onTriggerCommit(_ handler: @escaping @Sendable (TriggerCommit) -> Void) {
        store.onCommit { results in handler(TriggerCommit(results.lazy.map { (namespace: $0.namespace, reach: $0.triggerReach) })) }
    }
}
