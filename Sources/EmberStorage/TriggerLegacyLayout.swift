import EmberCore

/// Trigger state in the layout 0.6.0 (peer level 3) reads, for a snapshot such a member installs
/// (a member gone back to 0.6.0 and rejoining, or a 0.6.0 member added, while a trigger is
/// defined). 0.6.0 stops applying at a trigger state of format 2 and knows no shared change
/// records: each trigger's state goes out in format 1 and the records it has not delivered as its
/// own outbox rows (`TriggerChangeLog.ownRows`, what a trigger leaving its group gets); the shared
/// records and group summaries stay out. Definitions, dead letters and own outbox rows are the
/// same in both layouts. This build installs the same stream as an upgrade from 0.6.0
/// (`TriggerChangeLog.migrate`): nothing undelivered is lost either way.
enum TriggerLegacyLayout {
    static let statePrefix = TriggerKeys.prefix + Array("s/".utf8)
    static let sharedPrefixes = [TriggerKeys.prefix + Array("r/".utf8), TriggerKeys.prefix + Array("g/".utf8),
                                 TriggerRecordRows.headPrefix]

    /// Every row under `triggers/` in 0.6.0's layout, to `put`, from one read transaction.
    static func rows(_ tables: Tables, _ t: Txn, put: ([UInt8], [UInt8]) throws -> Void) throws {
        var states: [(key: [UInt8], ns: String, name: String, state: TriggerState)] = []
        try t.scan(tables.meta, prefix: TriggerKeys.prefix) { k, v in
            if sharedPrefixes.contains(where: { k.starts(with: $0) }) { return true }
            guard k.starts(with: statePrefix) else { try put(k, v); return true }
            let rest = k.dropFirst(statePrefix.count)
            guard let zero = rest.firstIndex(of: 0) else { throw StorageError.corrupt("trigger state key") }
            states.append((k, String(decoding: rest[..<zero], as: UTF8.self),
                           String(decoding: rest[(zero + 1)...], as: UTF8.self), try TriggerState(decoding: v)))
            return true
        }
        for var s in states {
            try TriggerChangeLog.ownRows(tables, t, s.ns, name: s.name, &s.state, put: put)
            try put(s.key, s.state.encodedV1)
        }
    }
}
