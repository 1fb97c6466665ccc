import EmberCore

/// A `p` (set) or `m` (merge) request's body as a write (reference §6.3), checked by the front's
/// limits (`WriteValidation`): the path, the data or the update's parts, the compare-and-set
/// condition and the writer's stamp. What the data may hold beyond the front's limits, and whether
/// the rules allow it, is decided when the write is applied.
public struct WireWrite: Sendable {
    public enum Kind: Sendable {
        /// `p`: replace the value at `path` (null deletes).
        case set(JSON)
        /// `m`: relative paths in path order, applied atomically.
        case update([(Path, JSON)])
    }

    /// What the data at `path` must be for a `p` to go ahead.
    public enum Condition: Sendable, Equatable {
        /// `h`: the §6.8 hash of the current value ("" = absent): the SDKs' transactions.
        case hash(String)
        /// `v`: Ember extension, the path version the client saw.
        case version(UInt64)
    }

    /// Ember extension `"w": {"id": "<writer>", "n": <seq>}`: names the write for exactly-once
    /// across resends. Only its shape is checked here; the store checks the id's characters.
    public struct Stamp: Sendable, Equatable {
        public let id: String
        public let n: Int64
    }

    public let path: Path
    public let kind: Kind
    public let condition: Condition?
    public let stamp: Stamp?

    /// Parses and checks the body of `action` (`p` or `m`). Checked in this order, so the first
    /// fault is the one reported: the path, the data, the condition, the stamp.
    public init(action: String, body b: KeyMap<JSON>, validation: WriteValidation) throws {
        precondition(WireRequestRoute.isWrite(action), "only p and m are writes")
        path = try WireClientMessage.path(of: b)
        if action == "m" {
            guard case .object(let parts)? = b["d"] else { throw EmberError.invalidData("a merge needs an object") }
            kind = .update(try validation.updateParts(base: path, parts))
            condition = nil
        } else {
            let data = b["d"] ?? .null
            try validation.validate(data, at: path)
            kind = .set(data)
            var condition: Condition?
            if let h = b["h"]?.stringValue { condition = .hash(h) }
            if case .int(let v)? = b["v"], v >= 0 { condition = .version(UInt64(v)) }
            self.condition = condition
        }
        stamp = try Self.stamp(b)
    }

    /// `w`, when present; its shape only (a string `id`, an integer `n`).
    public static func stamp(_ b: KeyMap<JSON>) throws -> Stamp? {
        guard let w = b["w"] else { return nil }
        guard case .string(let id)? = w["id"], case .int(let n)? = w["n"] else { throw invalidStamp }
        return Stamp(id: id, n: n)
    }

    /// A `w` that does not name a writer and a sequence number the store accepts.
    public static var invalidStamp: EmberError {
        .invalidData("w must be {\"id\": 1-64 characters of A-Z a-z 0-9 - _, \"n\": a positive integer}")
    }
}
