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
        var w = ByteWriter(capacity: 64 + entries.reduce(0) { $0 + 4 + $1.count })
        w.bytes += Self.magic
        w.u8(compressed ? Self.format : Self.uncompressedFormat)
        w.u64(first); w.u64(last); w.i64(firstTimestamp); w.i64(lastTimestamp)
        w.u64(UInt64(entries.count))
        let hash = Array(stateHash.utf8.prefix(255))
        w.u8(UInt8(hash.count)); w.bytes += hash
        var block = ByteWriter(capacity: entries.reduce(0) { $0 + 4 + $1.count })
        for e in entries {
            let n = UInt32(e.count)
            for k in 0..<4 { block.u8(UInt8(truncatingIfNeeded: n >> UInt32(24 - 8 * k))) }
            block.bytes += e
        }
        if compressed {
            w.u64(UInt64(block.bytes.count))
            w.bytes += Zlib.compress(block.bytes)
        } else {
            w.bytes += block.bytes
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

public struct ArchiveError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
