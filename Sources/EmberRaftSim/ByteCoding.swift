// Minimal little-endian byte encoding for simulator payloads (commands, KV snapshots).

import EmberRaft

struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ v: UInt8) { bytes.append(v) }

    mutating func u64(_ v: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }

    mutating func optionalI64(_ v: Int64?) {
        if let v { u8(1); i64(v) } else { u8(0) }
    }

    mutating func string(_ s: String) {
        let b = Array(s.utf8)
        u64(UInt64(b.count))
        bytes.append(contentsOf: b)
    }
}

struct ByteReader {
    let bytes: [UInt8]
    var pos = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { pos == bytes.count }

    mutating func u8() -> UInt8? {
        guard pos < bytes.count else { return nil }
        defer { pos += 1 }
        return bytes[pos]
    }

    mutating func u64() -> UInt64? {
        guard pos + 8 <= bytes.count else { return nil }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[pos + i]) << UInt64(8 * i) }
        pos += 8
        return v
    }

    mutating func i64() -> Int64? { u64().map { Int64(bitPattern: $0) } }

    mutating func optionalI64() -> Int64?? {
        guard let flag = u8() else { return nil }
        if flag == 0 { return .some(nil) }
        guard let v = i64() else { return nil }
        return .some(v)
    }

    mutating func string() -> String? {
        guard let n = u64(), pos + Int(n) <= bytes.count else { return nil }
        defer { pos += Int(n) }
        return String(decoding: bytes[pos..<pos + Int(n)], as: UTF8.self)
    }
}

/// FNV-1a over bytes; used for cheap fingerprints in invariant checks.
func fnv1a(_ bytes: [UInt8], seed: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
    var h = seed
    for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
    return h
}
