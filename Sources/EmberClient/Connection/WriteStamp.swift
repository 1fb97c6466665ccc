import EmberCore
import Foundation

/// An Ember extension of `p`/`m`: the write's name, `{"id": <writer>, "n": <number>}`. The server's
/// log remembers what each number of a writer came to, so a write sent again (after a dropped
/// connection, or by the next run of an app killed before it saw the answer) is answered without
/// being applied twice. Numbers only grow per writer: the Repo's write ids.
struct WriteStamp: Sendable, Equatable {
    let writer: String
    let seq: Int

    init(writer: String, writeID: Int) {
        precondition(writeID > 0, "write ids start at 1 (the wire wants positive numbers)")
        self.writer = writer
        self.seq = writeID
    }

    var wire: JSON { .object(["id": .string(writer), "n": .int(Int64(seq))]) }

    /// 32 hex characters: random per run, valid as the server requires (1–64 of `A–Z a–z 0–9 - _`).
    static func newWriter() -> String {
        UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }
}
