import EmberCore

/// The value of an `idx` row. Its key already holds the index value, order-preservingly and
/// exactly (numbers bit for bit, strings escaped) unless a string was cut to
/// `KeyCodec.indexStringBytes`: then, and only then, the value keeps the child key's offset
/// (u16 BE) and the exact value (`ByteWriter.indexValue`). Other rows have an EMPTY value: the
/// value and the offset are read back from the key (`KeyCodec.readIndexValue`), which spares
/// every row 11 of its ~50 bytes.
///
/// Rows of the format before (every value "offset + exact value") still read. Snapshot streams
/// carry that form, keyed by location key (`Tables.forEachLogicalRow`), which every version
/// reads; installing compacts them again (`compacted`) under location ids (`IndexLocations`).
/// `depths`/`valueStart` parse such location-keyed rows (snapshot streams, format-3 text
/// migration).
enum IndexRowValue {
    /// The value of a row whose key is `key` with the child segment at `offset`.
    static func encode(key: [UInt8], offset: Int, value: IndexValue, truncated: Bool) -> [UInt8] {
        if !truncated { return [] }
        var w = ByteWriter()
        w.u8(UInt8(offset >> 8)); w.u8(UInt8(offset & 0xFF))
        w.indexValue(value)
        return w.bytes
    }

    /// The index value and the child segment's offset of a row whose index value starts at
    /// `valueStart` in its key.
    static func decode(key k: [UInt8], value v: [UInt8], valueStart: Int) throws -> (value: IndexValue, offset: Int) {
        if v.isEmpty {
            var i = valueStart
            guard let (value, _) = KeyCodec.readIndexValue(k, &i) else { throw StorageError.corrupt("index key value") }
            return (value, i)
        }
        var r = ByteReader(v)
        let off = Int(try r.u8()) << 8 | Int(try r.u8())
        return (try r.indexValue(), off)
    }

    /// A row value of the format before made compact when its key holds the exact value (the
    /// key's bytes before the child segment are the value's full encoding).
    static func compacted(key k: [UInt8], value v: [UInt8]) throws -> [UInt8] {
        guard v.count >= 2 else { return v }
        var r = ByteReader(v)
        let off = Int(try r.u8()) << 8 | Int(try r.u8())
        let value = try r.indexValue()
        var enc: [UInt8] = []
        let truncated = KeyCodec.appendIndexValue(value, to: &enc)
        guard !truncated, off >= enc.count, off <= k.count, Array(k[(off - enc.count)..<off]) == enc else { return v }
        return []
    }

    /// Location depth of every index definition, by namespace prefix + definition id (from the
    /// definitions in `meta`): where a row's index value starts in its key.
    static func depths(_ tables: Tables, _ t: Txn) throws -> [[UInt8]: Int] {
        var depth: [[UInt8]: Int] = [:]
        let metaPrefix = Array("indexes/".utf8)
        try t.scan(tables.meta, prefix: metaPrefix) { k, v in
            let nsp = KeyCodec.namespacePrefix(String(decoding: k.dropFirst(metaPrefix.count), as: UTF8.self))
            for d in try IndexDef.decodeList(v) { depth[nsp + d.id] = d.pattern.count }
            return true
        }
        return depth
    }

    /// Where the index value starts in row key `k` (nil: no definition for it).
    static func valueStart(_ k: [UInt8], _ depths: [[UInt8]: Int]) throws -> Int? {
        guard let zero = k.firstIndex(of: 0), k.count >= zero + 9 else { throw StorageError.corrupt("index row") }
        guard let levels = depths[Array(k[0..<zero + 9])] else { return nil }
        var i = zero + 9
        for _ in 0..<levels {
            guard KeyCodec.readSegment(k, &i) != nil else { throw StorageError.corrupt("index row location") }
        }
        return i
    }
}

extension KeyCodec {
    /// Reads one index value encoded by `appendIndexValue` at `i` (advancing it): the value and
    /// whether its string was cut (then the value is only its first bytes). nil when malformed.
    static func readIndexValue(_ b: [UInt8], _ i: inout Int) -> (IndexValue, truncated: Bool)? {
        guard i < b.count else { return nil }
        let tag = b[i]
        i += 1
        switch tag {
        case 0x10: return (.null, false)
        case 0x20: return (.bool(false), false)
        case 0x30: return (.bool(true), false)
        case 0x40:
            guard i + 8 <= b.count else { return nil }
            var u: UInt64 = 0
            for k in 0..<8 { u = u << 8 | UInt64(b[i + k]) }
            i += 8
            let bits = u & (1 << 63) != 0 ? u & ~(1 << 63) : ~u
            return (.number(Double(bitPattern: bits)), false)
        case 0x50:
            var s: [UInt8] = []
            while i + 1 < b.count {
                if b[i] != 0 { s.append(b[i]); i += 1; continue }
                switch b[i + 1] {
                case 0xFF: s.append(0); i += 2
                case 0x01, 0x02:
                    let cut = b[i + 1] == 0x02
                    i += 2
                    return (.string(KeyCodec.text(s)), cut)
                default: return nil
                }
            }
            return nil
        case 0x60: return (.object, false)
        default: return nil
        }
    }
}
