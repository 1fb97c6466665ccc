import CLMDB

/// The keys the writer put or deleted while an online defrag copied the environment (issue 41).
/// The copy is taken from one read snapshot; these keys are what it missed since. Catching up
/// reads each key's current value (or its absence) from a later snapshot and writes that into
/// the copy, so noting a key too many (an aborted transaction, a put of the same value) is
/// harmless and only a key not noted would be lost: every write of the writer goes through
/// `Txn.put`, `Txn.delete`, `Cursor.deleteCurrent` or `Txn.drop`, which note here.
///
/// Confined to the writer thread while it records; handed to the catch-up after the writer
/// stopped recording into it (the writer's exclusive job swaps it out), hence `@unchecked Sendable`.
final class ChangedKeys: @unchecked Sendable {
    /// Keys noted at most, over all tables (memory bound: a key is at most 511 bytes); past it
    /// the defrag gives up rather than hold the writer's whole working set.
    static let maxKeys = 2_000_000

    private(set) var keys: [MDB_dbi: Set<[UInt8]>] = [:]
    private(set) var count = 0
    /// Why this copy cannot be caught up by keys (a table was dropped, too many keys), or nil.
    private(set) var invalid: String?

    func note(_ dbi: MDB_dbi, _ key: [UInt8]) {
        guard invalid == nil else { return }
        if keys[dbi, default: []].insert(key).inserted {
            count += 1
            if count > Self.maxKeys {
                invalidate("more than \(Self.maxKeys) keys were written while the copy ran")
            }
        }
    }

    func invalidate(_ why: String) {
        if invalid == nil { invalid = why }
        keys = [:]
    }
}
