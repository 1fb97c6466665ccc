import CZlib

/// zlib's one-shot deflate and inflate (RFC 1950 streams), for archive segments.
enum Zlib {
    /// Fast over small: the leader compresses while it serves writes (archiving may cost it
    /// little throughput), and log entries (JSON, repeated paths) compress well even at level 1.
    static let level: Int32 = 1

    static func compress(_ input: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        compress(input, appendingTo: &out)
        return out
    }

    static func bound(_ count: Int) -> Int { Int(compressBound(uLong(count))) }

    /// Deflates `input` onto the end of `out` (no intermediate copy of the compressed bytes).
    static func compress(_ input: [UInt8], appendingTo out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: bound(input.count)))
        var n = uLongf(out.count - start)
        let rc = input.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                compress2(dst.baseAddress! + start, &n, src.baseAddress, uLong(src.count), level)
            }
        }
        // Only a too small buffer (compressBound rules it out) or no memory fail here.
        precondition(rc == Z_OK, "zlib compress2 failed: \(rc)")
        out.removeSubrange((start + Int(n))...)
    }

    /// Inflates `input`, which must give exactly `size` bytes.
    static func decompress(_ input: ArraySlice<UInt8>, size: Int) throws(ArchiveError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: size)
        var n = uLongf(size)
        let rc = input.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                uncompress(dst.baseAddress, &n, src.baseAddress, uLong(src.count))
            }
        }
        guard rc == Z_OK, Int(n) == size else { throw ArchiveError("compressed entries do not inflate to \(size) bytes (zlib \(rc))") }
        return out
    }
}
