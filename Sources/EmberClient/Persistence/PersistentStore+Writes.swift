import EmberCore
import Foundation
import GRDB

/// A local write not yet acknowledged by the server, as the app made it: server values are kept
/// as placeholders so they resolve on the server when the write is finally sent.
struct StoredWrite: Equatable, Sendable {
    enum Kind: String, Sendable {
        /// `setValue`/`removeValue`: `data` replaces the value at `path`.
        case set
        /// `updateChildValues`: `data` is an object of relative paths (wire form) to values.
        case merge
    }

    /// The Repo's write id: also the order writes were made in, and the order they are sent.
    var id: Int
    var path: Path
    var kind: Kind
    var data: JSON
    /// The writer id the write was (or will be) sent under (`WriteStamp`); nil for writes queued
    /// by a version that did not stamp them.
    var writer: String? = nil
}

/// The queue of outstanding writes (SDK `userWrites`). A write is saved before it is handed to the
/// connection and deleted when the server acknowledges or rejects it.
extension PersistentStore {
    func saveWrite(_ write: StoredWrite) throws {
        try db.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO pending_write (id, path, kind, data, writer) VALUES (?, ?, ?, ?, ?)",
                           arguments: [write.id, Self.key(write.path), write.kind.rawValue, write.data.serialized(), write.writer])
        }
    }

    func removeWrite(id: Int) throws {
        try db.write { db in try db.execute(sql: "DELETE FROM pending_write WHERE id = ?", arguments: [id]) }
    }

    func removeAllWrites() throws {
        try db.write { db in try db.execute(sql: "DELETE FROM pending_write") }
    }

    /// Outstanding writes, oldest first.
    func writes() throws -> [StoredWrite] {
        try db.read { db in try Self.fetchWrites(db) }
    }

    static func fetchWrites(_ db: GRDB.Database) throws -> [StoredWrite] {
        try Row.fetchAll(db, sql: "SELECT id, path, kind, data, writer FROM pending_write ORDER BY id").map { row in
            let kindText: String = row["kind"]
            guard let kind = StoredWrite.Kind(rawValue: kindText) else {
                throw StoreError.corrupt("write \(row["id"] as Int) has unknown kind \(kindText)")
            }
            return StoredWrite(id: row["id"], path: path(fromKey: row["path"]), kind: kind,
                               data: try JSON.parse(row["data"] as String), writer: row["writer"])
        }
    }
}
