import EmberCore
import Foundation
import Testing
@testable import EmberStorage

/// `LogEntry.isTriggerAdvance` reads an encoded entry up to its operation's tags: what the
/// leader checks before it sends entries to a member below peer level 4.
@Suite struct TriggerAdvancePeekTests {
    static func bytes(_ op: WriteOperation, auth: WriteAuth = .admin, writer: WriterStamp? = nil) -> [UInt8] {
        LogEntry(index: 7, term: 2, namespace: "t", operation: op, timestamp: 1, auth: auth, writer: writer).encoded()
    }

    @Test func advanceEntriesAndNoOthers() throws {
        let advance = WriteOperation.triggers(.advance([TriggerCursor(name: "a", group: 1, through: 5, rows: [3])]))
        #expect(LogEntry.isTriggerAdvance(Self.bytes(advance)))
        #expect(LogEntry.isTriggerAdvance(Self.bytes(advance, auth: .user(.object(["uid": .string("u")])))))
        #expect(LogEntry.isTriggerAdvance(Self.bytes(advance, writer: WriterStamp(writer: "w", seq: 1))))
        #expect(!LogEntry.isTriggerAdvance(Self.bytes(.triggers(.settle(name: "a", indexes: [5], deadLetter: nil)))))
        #expect(!LogEntry.isTriggerAdvance(Self.bytes(.triggers(.pause(name: "a")))))
        #expect(!LogEntry.isTriggerAdvance(Self.bytes(.noop)))
        #expect(!LogEntry.isTriggerAdvance(Self.bytes(.set(path: try Path("m/a"), value: .int(1), condition: nil), auth: .user(nil))))
        #expect(!LogEntry.isTriggerAdvance([]))
        #expect(!LogEntry.isTriggerAdvance([2, 0, 0]))
    }
}
