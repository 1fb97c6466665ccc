import EmberCore

/// One archive segment: a run of consecutive committed log entries, as the log stores them.
///
/// Layout: magic `EMBERAR1`, format u8, first index u64, last index u64, first and last
/// timestamp i64 (ms; the earliest and latest of its entries that carry one: a Raft no-op or
/// membership entry carries 0), entry count u64, the state hash at the last entry (u8 length +
/// ASCII, "" when not recorded), then the entry block: per entry `[u32 BE length][entry]`;
/// then the SHA-1 of every byte before it (20 bytes). All integers big-endian.
/// Format 1 (0.6.0) stores the block as it is; format 2 stores its length (u64) and the block
/// deflated (a zlib stream, `Zlib.level`). Both are read. Pure: bytes in, bytes out.
public struct ArchiveSegment: Sendable, Equatable {
    public static let magic = Array("EMBERAR1".utf8)
    /// The format written.
    public static let format: UInt8 = 2
    public static let uncompressedFormat: UInt8 = 1
    /// Largest entry block a compressed segment may inflate to (the archiver closes segments at
    /// 1 GiB of entries at most, plus the entries through the applied index).
    public static let maxBlockBytes = 4 << 30
    /// Largest entry a segment holds (the store refuses larger ones: `StoreOptions.maxEntryBytes`).
    public static let maxEntryBytes = 64 << 20

    public var first: UInt64
    public var last: UInt64
    public var firstTimestamp: Int64
    public var lastTimestamp: Int64
    /// The state hash (`EmberStore.stateHash`, what members compare) once the last entry is applied.
    public var stateHash: String
    /// The entries' encodings (`LogEntry.encoded`), `first...last` in order.
    public var entries: [[UInt8]]

    public init(entries: [(index: UInt64, bytes: [UInt8])], stateHash: String) throws(ArchiveError) {
        guard let f = entries.first, let l = entries.last else { throw ArchiveError("an empty segment") }
        for (a, b) in zip(entries, entries.dropFirst()) where b.index != a.index + 1 {
            throw ArchiveError("segment entries are not consecutive at \(b.index)")
        }
        var lo: Int64 = 0, hi: Int64 = 0
        for e in entries {
            let ts: Int64
            do { ts = try LogEntry.timestamp(of: e.bytes) } catch { throw ArchiveError("entry \(e.index): \(error)") }
            if ts > 0 { lo = lo == 0 ? ts : min(lo, ts); hi = max(hi, ts) }
        }
        first = f.index; last = l.index; firstTimestamp = lo; lastTimestamp = hi
        self.stateHash = stateHash
        self.entries = entries.map(\.bytes)
    }

    public var count: Int { entries.count }

    /// The object name: index range and time range, so a listing says what each holds.
    public var name: String {
        ArchiveName.segment(first: first, last: last, firstTimestamp: firstTimestamp, lastTimestamp: lastTimestamp)
    }

    /// The segment's bytes: compressed (format 2) unless `compressed` is false (format 1).
    public func encoded(compressed: Bool = true) -> [UInt8] {
        var block = ByteWriter(capacity: entries.reduce(0) { $0 + 4 + $1.count })
        for e in entries {
            let n = UInt32(e.count)
            for k in 0..<4 { block.u8(UInt8(truncatingIfNeeded: n >> UInt32(24 - 8 * k))) }
            block.bytes += e
        }
        return Self.encode(first: first, last: last, firstTimestamp: firstTimestamp, lastTimestamp: lastTimestamp,
                           stateHash: stateHash, block: block.bytes, compressed: compressed)
    }

    /// A segment's bytes from its header fields and its entry block (`count` is `last - first + 1`).
    static func encode(first: UInt64, last: UInt64, firstTimestamp: Int64, lastTimestamp: Int64, stateHash: String,
                       block: [UInt8], compressed: Bool) -> [UInt8] {
        let hash = Array(stateHash.utf8.prefix(255))
        var w = ByteWriter(capacity: 64 + hash.count + 20 + (compressed ? Int(Zlib.bound(block.count)) : block.count))
        w.bytes += Self.magic
        w.u8(compressed ? Self.format : Self.uncompressedFormat)
        w.u64(first); w.u64(last); w.i64(firstTimestamp); w.i64(lastTimestamp)
        w.u64(last - first + 1)
        w.u8(UInt8(hash.count)); w.bytes += hash
        if compressed {
            w.u64(UInt64(block.count))
            Zlib.compress(block, appendingTo: &w.bytes)
        } else {
            w.bytes += block
        }
        w.bytes += FastSHA1.digest(w.bytes)
        return w.bytes
    }

    /// Decodes and checks a segment (either format): checksum, header, entry framing,
    /// consecutive indexes (each entry's own index field), and the timestamp range.
    public init(decoding bytes: [UInt8]) throws(ArchiveError) {
        guard bytes.count >= Self.magic.count + 1 + 40 + 1 + 20, Array(bytes[0..<8]) == Self.magic else {
            throw ArchiveError("not an Ember archive segment")
        }
        let body = Array(bytes[0..<(bytes.count - 20)])
        guard FastSHA1.digest(body) == Array(bytes[(bytes.count - 20)...]) else { throw ArchiveError("checksum mismatch") }
        var r = ByteReader(body, at: 8)
        do {
            let format = try r.u8()
            guard format == Self.format || format == Self.uncompressedFormat else { throw ArchiveError("unknown segment format \(format)") }
            first = try r.u64(); last = try r.u64()
            firstTimestamp = try r.i64(); lastTimestamp = try r.i64()
            let count = try r.u64()
            guard last >= first, count == last - first + 1, count <= UInt64(body.count) else {
                throw ArchiveError("segment header: \(first)...\(last) with \(count) entries")
            }
            let hn = Int(try r.u8())
            guard r.i + hn <= body.count else { throw ArchiveError("segment header truncated") }
            stateHash = String(decoding: body[r.i..<(r.i + hn)], as: UTF8.self)
            r.i += hn
            // The entry block and where its first entry starts.
            let block: [UInt8]
            var i: Int
            if format == Self.format {
                let size = try r.u64()
                guard size >= count * 4, size <= UInt64(Self.maxBlockBytes) else { throw ArchiveError("segment block of \(size) bytes") }
                block = try Zlib.decompress(body[r.i...], size: Int(size))
                i = 0
            } else {
                block = body
                i = r.i
            }
            var out: [[UInt8]] = []
            out.reserveCapacity(Int(count))
            var lo: Int64 = 0, hi: Int64 = 0
            for k in 0..<count {
                guard i + 4 <= block.count else { throw ArchiveError("segment truncated at entry \(first + k)") }
                let n = block[i..<(i + 4)].reduce(0) { ($0 << 8) | Int($1) }
                i += 4
                guard n <= Self.maxEntryBytes, i + n <= block.count else { throw ArchiveError("segment entry \(first + k) length \(n)") }
                let e = Array(block[i..<(i + n)])
                i += n
                var h = ByteReader(e, at: 1)
                guard e.count >= 25, try h.u64() == first + k else { throw ArchiveError("segment entry \(first + k) holds another index") }
                let ts = try LogEntry.timestamp(of: e)
                if ts > 0 { lo = lo == 0 ? ts : min(lo, ts); hi = max(hi, ts) }
                out.append(e)
            }
            guard i == block.count else { throw ArchiveError("segment has bytes after its entries") }
            guard lo == firstTimestamp, hi == lastTimestamp else { throw ArchiveError("segment time range differs from its entries") }
            entries = out
        } catch let e as ArchiveError {
            throw e
        } catch {
            throw ArchiveError("segment: \(error)")
        }
    }

    /// The entries decoded.
    public func decodedEntries() throws(ArchiveError) -> [LogEntry] {
        var out: [LogEntry] = []
        out.reserveCapacity(entries.count)
        for (k, e) in entries.enumerated() {
            do { out.append(try LogEntry(decoding: e)) } catch { throw ArchiveError("entry \(first + UInt64(k)): \(error)") }
        }
        return out
    }
}

/// The open segment while the archiver reads the log: each entry's bytes are copied once, from
/// the log's pages straight into the segment's entry block (`[u32 BE length][entry]`, the block
/// `ArchiveSegment` encodes), with the range and times its header needs. `encoded` gives the
/// bytes `ArchiveSegment(entries:stateHash:).encoded()` gives for the same entries, without an
/// array per entry or a second copy of the block.
public struct ArchiveSegmentBuilder: Sendable {
    public private(set) var block: [UInt8] = []
    /// The first entry's index (meaningless while empty).
    public private(set) var first: UInt64 = 0
    public private(set) var count = 0
    /// The earliest and latest entry times (0 when no entry carries one), as `ArchiveSegment`.
    public private(set) var firstTimestamp: Int64 = 0
    public private(set) var lastTimestamp: Int64 = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }
    public var last: UInt64? { count == 0 ? nil : first + UInt64(count) - 1 }
    /// Bytes of the entries themselves (what the log stores; the block adds 4 per entry).
    public var entryBytes: Int { block.count - 4 * count }

    /// Appends the entry at `index` (the next one: entries are consecutive).
    public mutating func append(index: UInt64, _ entry: UnsafeRawBufferPointer) throws(ArchiveError) {
        guard entry.count >= 25, entry[0] == 1 || entry[0] == 2 else { throw ArchiveError("entry \(index): not an encoded log entry") }
        if count == 0 {
            first = index
        } else if index != first + UInt64(count) {
            throw ArchiveError("segment entries are not consecutive at \(index)")
        }
        var v: UInt64 = 0
        for k in 17..<25 { v = v << 8 | UInt64(entry[k]) }
        let ts = Int64(bitPattern: v)
        if ts > 0 {
            firstTimestamp = firstTimestamp == 0 ? ts : min(firstTimestamp, ts)
            lastTimestamp = max(lastTimestamp, ts)
        }
        let n = UInt32(entry.count)
        block.append(UInt8(truncatingIfNeeded: n >> 24))
        block.append(UInt8(truncatingIfNeeded: n >> 16))
        block.append(UInt8(truncatingIfNeeded: n >> 8))
        block.append(UInt8(truncatingIfNeeded: n))
        block.append(contentsOf: entry)
        count += 1
    }

    public mutating func append(index: UInt64, _ entry: [UInt8]) throws {
        try entry.withUnsafeBytes { try append(index: index, $0) }
    }

    /// The entries, in order (the rare paths that trim a segment; tests).
    public var entries: [(index: UInt64, bytes: [UInt8])] {
        var out: [(index: UInt64, bytes: [UInt8])] = []
        out.reserveCapacity(count)
        var i = 0
        for k in 0..<count {
            let n = block[i..<(i + 4)].reduce(0) { ($0 << 8) | Int($1) }
            out.append((first + UInt64(k), Array(block[(i + 4)..<(i + 4 + n)])))
            i += 4 + n
        }
        return out
    }

    /// Empty again, keeping the block's memory (the next segment grows to the same size).
    public mutating func reset() {
        block.removeAll(keepingCapacity: true)
        first = 0; count = 0; firstTimestamp = 0; lastTimestamp = 0
    }

    /// Drops the entries at or below `index` (another writer stored them).
    public mutating func removeThrough(_ index: UInt64) {
        guard let last, index >= first else { return }
        var rest = ArchiveSegmentBuilder()
        if index < last {
            // Entries this builder already took: they append again.
            for e in entries where e.index > index { try! rest.append(index: e.index, e.bytes) }
        }
        self = rest
    }

    /// The object name the segment gets.
    public var name: String {
        precondition(count > 0, "an empty segment has no name")
        return ArchiveName.segment(first: first, last: last!, firstTimestamp: firstTimestamp, lastTimestamp: lastTimestamp)
    }

    /// The segment's bytes (format 2, or 1 when `compressed` is false), with `stateHash` at its end.
    public func encoded(stateHash: String, compressed: Bool = true) -> [UInt8] {
        precondition(count > 0, "an empty segment")
        return ArchiveSegment.encode(first: first, last: last!, firstTimestamp: firstTimestamp, lastTimestamp: lastTimestamp,
                                     stateHash: stateHash, block: block, compressed: compressed)
    }
}

public struct ArchiveError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
