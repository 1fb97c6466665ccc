import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reading the staged entries back (the archiver, `EmberStore.appendEncodedEntries`).
struct ReadCursor {
    var segment: UInt64
    var fd: Int32
    /// The next entry's index and its record's offset.
    var next: UInt64
    var offset: Int
}

extension StagingLog {
    /// Calls `body` with the committed entries `from...through` in order (borrowed bytes, valid
    /// during the call), until it returns false. Returns how many it saw. Stops early at an entry
    /// the staging does not hold (dropped, or past the last commit): the caller checks the count.
    /// Throws on a damaged record within the committed entries.
    func read(from: UInt64, through: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool) throws -> Int {
        let (segments, held) = shared.withLock { ($0.segments, $0.through) }
        let end = min(through, held)
        guard from <= end, let first = segments.first, from >= first else { return 0 }
        return try readCursor.withLock { cursor -> Int in
            var n = 0
            var expected = from
            var i = segments.lastIndex(where: { $0 <= from })!
            while expected <= end && i < segments.count {
                let seg = segments[i]
                var c: ReadCursor
                if let old = cursor, old.segment == seg {
                    c = old
                    if c.next > expected { c.next = seg; c.offset = 0 }
                } else {
                    if let old = cursor { Glibc.close(old.fd); cursor = nil }
                    let fd = open(path(seg), O_RDONLY | O_CLOEXEC)
                    // Dropped meanwhile (compacted past the hold): the caller sees the gap.
                    guard fd >= 0 else { return n }
                    c = ReadCursor(segment: seg, fd: fd, next: seg, offset: 0)
                }
                var stop = false
                var damaged: UInt64? = nil
                try Self.scan(c.fd, from: c.offset, maxEntryBytes: maxEntryBytes) { index, entry, after in
                    guard index == c.next else { damaged = c.next; return false }
                    if index > end { return false }
                    if index >= expected {
                        if try !body(index, entry) { stop = true }
                        n += 1
                        expected = index + 1
                    }
                    c.next = index + 1
                    c.offset = after
                    return !stop && index < end
                }
                cursor = c
                if let damaged { throw StorageError.corrupt("archive staging: entry \(damaged) of \(path(seg)) is damaged") }
                if stop || expected > end { break }
                // The segment ended: the next one begins at the next entry (or the entries are gone).
                i += 1
                guard i < segments.count, segments[i] == expected else {
                    // A committed entry was synced there before its commit: a file that ends
                    // (or turns unreadable) before it is damaged.
                    throw StorageError.corrupt("archive staging: committed entry \(expected) is missing from \(path(seg))")
                }
            }
            return n
        }
    }
}
