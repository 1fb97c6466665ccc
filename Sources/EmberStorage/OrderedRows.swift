/// Index rows a bulk write puts and deletes, kept until its end and then written in key order
/// (`Applier.rows`): the last change of a key wins, as if each had been made at once. Nothing
/// reads the index table while they wait (a write's old rows are derived from the tree).
final class OrderedRows {
    /// Key → row value, or nil for a delete.
    private var rows: [[UInt8]: [UInt8]?] = [:]
    /// Locations (key, id) whose row a delete left without a replacement: after the flush, their
    /// ids go when no row is left (`Tables.sweep`).
    var emptied: [(locKey: [UInt8], id: [UInt8])] = []

    func put(_ key: [UInt8], _ value: [UInt8]) { rows.updateValue(value, forKey: key) }
    func delete(_ key: [UInt8]) { rows.updateValue(nil, forKey: key) }

    /// Writes the rows into `table` in key order, with MDB_APPEND past its end, and forgets them.
    func flush(_ t: Txn, _ table: SplitTable) throws {
        if rows.isEmpty { return }
        for key in rows.keys.sorted(by: bytesLess) {
            if let value = rows[key]! { try t.putOrdered(table, key, value) } else { try t.delete(table, key) }
        }
        rows = [:]
    }
}
