// Client-observed history of key-value operations, for linearizability checking.

import EmberRaft

public enum KVInput: Sendable, Hashable {
    case put(Int64)
    case get
    case cas(expected: Int64?, new: Int64)
}

public enum KVOutput: Sendable, Hashable {
    case ok
    case value(Int64?)
    case casResult(Bool)
    /// Outcome unknown (timeout, crash): the operation may or may not have taken effect.
    case unknown
}

/// One operation: invoked at `call`, completed at `ret` (nil when the outcome is unknown, which
/// means it may take effect at any point after `call`, or never).
public struct HistoryOperation: Sendable, Hashable {
    public var id: Int
    public var client: Int
    public var key: String
    public var input: KVInput
    public var output: KVOutput
    public var call: Int
    public var ret: Int?

    public init(id: Int, client: Int, key: String, input: KVInput, output: KVOutput, call: Int, ret: Int?) {
        self.id = id
        self.client = client
        self.key = key
        self.input = input
        self.output = output
        self.call = call
        self.ret = ret
    }
}

/// Records invocations and completions with a logical clock that strictly increases.
public struct History: Sendable {
    public private(set) var operations: [HistoryOperation] = []
    private var open: [Int: HistoryOperation] = [:]
    private var clock = 0
    private var nextID = 0

    public init() {}

    public mutating func invoke(client: Int, key: String, input: KVInput) -> Int {
        clock += 1
        nextID += 1
        open[nextID] = HistoryOperation(id: nextID, client: client, key: key, input: input, output: .unknown, call: clock, ret: nil)
        return nextID
    }

    public mutating func complete(_ id: Int, output: KVOutput) {
        guard var op = open.removeValue(forKey: id) else { return }
        clock += 1
        op.output = output
        op.ret = clock
        operations.append(op)
    }

    /// The operation certainly had no effect (rejected): drop it from the history.
    public mutating func discard(_ id: Int) { open[id] = nil }

    /// Timed out / crashed: outcome unknown. Reads have no effect, so they are simply dropped.
    public mutating func abandon(_ id: Int) {
        guard let op = open.removeValue(forKey: id) else { return }
        if op.input != .get { operations.append(op) }
    }

    public func isOpen(_ id: Int) -> Bool { open[id] != nil }

    /// Call at the end: every still-open operation becomes unknown.
    public mutating func closeAll() {
        for id in open.keys.sorted() { abandon(id) }
    }
}
