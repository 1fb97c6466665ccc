// A tiny key-value state machine replicated through Raft in the simulator.

import EmberRaft

/// A write command carried in a `.normal` log entry.
public struct KVCommand: Sendable, Hashable {
    public enum Op: Sendable, Hashable {
        case put(key: String, value: Int64)
        /// Sets `new` iff the current value equals `expected` (nil = absent).
        case cas(key: String, expected: Int64?, new: Int64)
    }

    /// Client operation id, so the host can match applied entries to requests.
    public var opID: UInt64
    public var op: Op

    public init(opID: UInt64, op: Op) {
        self.opID = opID
        self.op = op
    }

    public func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.u64(opID)
        switch op {
        case .put(let key, let value):
            w.u8(1); w.string(key); w.i64(value)
        case .cas(let key, let expected, let new):
            w.u8(2); w.string(key); w.optionalI64(expected); w.i64(new)
        }
        return w.bytes
    }

    public init?(decoding bytes: [UInt8]) {
        var r = ByteReader(bytes)
        guard let id = r.u64(), let tag = r.u8(), let key = r.string() else { return nil }
        switch tag {
        case 1:
            guard let v = r.i64() else { return nil }
            op = .put(key: key, value: v)
        case 2:
            guard let e = r.optionalI64(), let n = r.i64() else { return nil }
            op = .cas(key: key, expected: e, new: n)
        default:
            return nil
        }
        guard r.atEnd else { return nil }
        opID = id
    }
}

public struct KVStore: Sendable, Hashable {
    public private(set) var values: [String: Int64] = [:]

    public init() {}

    /// Applies a command; returns the CAS outcome (always true for puts).
    @discardableResult
    public mutating func apply(_ command: KVCommand) -> Bool {
        switch command.op {
        case .put(let key, let value):
            values[key] = value
            return true
        case .cas(let key, let expected, let new):
            guard values[key] == expected else { return false }
            values[key] = new
            return true
        }
    }

    public func get(_ key: String) -> Int64? { values[key] }

    /// Deterministic serialization (sorted keys) used as snapshot data.
    public func serialized() -> [UInt8] {
        var w = ByteWriter()
        w.u64(UInt64(values.count))
        for key in values.keys.sorted() {
            w.string(key)
            w.i64(values[key]!)
        }
        return w.bytes
    }

    public init?(deserializing bytes: [UInt8]) {
        if bytes.isEmpty { return }  // bootstrap snapshot carries no data
        var r = ByteReader(bytes)
        guard let n = r.u64() else { return nil }
        for _ in 0..<n {
            guard let k = r.string(), let v = r.i64() else { return nil }
            values[k] = v
        }
        guard r.atEnd else { return nil }
    }

    public var fingerprint: UInt64 { fnv1a(serialized()) }
}
