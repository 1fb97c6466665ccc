import EmberCore

/// A leaf as the record encodings write it, whoever holds it: a `Node`'s `Leaf`, or an item of a
/// `TextTree` read straight from a bulk update's text (issue 42). One encoder serves both, so a
/// record written from the text stays byte-equal to the one written from the node
/// (`TextRecordsTests`), with no `String` built for a text item.
struct LeafBytes<UTF8: Collection> where UTF8.Element == UInt8 {
    /// The kind byte of both encodings: false 1, true 2, int 3, double 4, string 5.
    var kind: UInt8
    /// An int's (two's complement) or a double's bit pattern; 0 otherwise.
    var bits: UInt64
    /// A string's UTF-8; empty otherwise.
    var utf8: UTF8

    static var intKind: UInt8 { 3 }
    static var doubleKind: UInt8 { 4 }
    static var stringKind: UInt8 { 5 }

    /// An int's zigzag form (`compactLeaf`'s varint: small magnitudes of either sign stay short).
    var zigzag: UInt64 {
        let i = Int64(bitPattern: bits)
        return UInt64(bitPattern: (i << 1) ^ (i >> 63))
    }

    /// Bytes `ByteWriter.compactLeaf` writes for this leaf after its tag byte, priority excluded.
    var compactPayloadSize: Int {
        switch kind {
        case Self.intKind: return LogEntry.varintSize(zigzag)
        case Self.doubleKind: return 8
        case Self.stringKind: return LogEntry.varintSize(utf8.count) + utf8.count
        default: return 0
        }
    }
}

extension Leaf {
    /// This leaf in the encoders' terms.
    var bytes: LeafBytes<String.UTF8View> {
        switch self {
        case .bool(let b): return LeafBytes(kind: b ? 2 : 1, bits: 0, utf8: "".utf8)
        case .int(let i): return LeafBytes(kind: 3, bits: UInt64(bitPattern: i), utf8: "".utf8)
        case .double(let d): return LeafBytes(kind: 4, bits: d.bitPattern, utf8: "".utf8)
        case .string(let s): return LeafBytes(kind: 5, bits: 0, utf8: s.utf8)
        }
    }
}

extension TextTree {
    /// A leaf item in the encoders' terms (its string's UTF-8 read in place).
    func leafBytes(_ item: Item) -> LeafBytes<ArraySlice<UInt8>> {
        switch item.kind {
        case .bool: return LeafBytes(kind: item.bits == 1 ? 2 : 1, bits: 0, utf8: [])
        case .int: return LeafBytes(kind: 3, bits: item.bits, utf8: [])
        case .double: return LeafBytes(kind: 4, bits: item.bits, utf8: [])
        case .string: return LeafBytes(kind: 5, bits: 0, utf8: string(item))
        case .object: preconditionFailure("an object is no leaf")
        }
    }
}

extension ByteWriter {
    /// A tree record's leaf: its kind byte, then an int's or double's 8 bytes or a string's
    /// length and UTF-8.
    mutating func leaf<S>(_ l: LeafBytes<S>) {
        u8(l.kind)
        switch l.kind {
        case LeafBytes<S>.intKind, LeafBytes<S>.doubleKind: u64(l.bits)
        case LeafBytes<S>.stringKind: varint(l.utf8.count); bytes.append(contentsOf: l.utf8)
        default: break
        }
    }

    mutating func leaf(_ l: Leaf) { leaf(l.bytes) }

    /// A leaf and its priority in one tag byte (low 3 bits: the kind, an int as a zigzag varint;
    /// bits 4–5: no priority 0, number 1, string 2), then the payload and the priority's.
    mutating func compactLeaf<S>(_ l: LeafBytes<S>, _ p: Priority?) {
        let pbits: UInt8
        switch p {
        case nil: pbits = 0
        case .number?: pbits = 0x10
        case .string?: pbits = 0x20
        }
        u8(l.kind | pbits)
        switch l.kind {
        case LeafBytes<S>.intKind: uvarint(l.zigzag)
        case LeafBytes<S>.doubleKind: u64(l.bits)
        case LeafBytes<S>.stringKind: varint(l.utf8.count); bytes.append(contentsOf: l.utf8)
        default: break
        }
        switch p {
        case nil: break
        case .number(let d)?: f64(d)
        case .string(let s)?: string(s)
        }
    }

    mutating func compactLeaf(_ l: Leaf, _ p: Priority?) { compactLeaf(l.bytes, p) }
}

extension InlineObject {
    /// Bytes an inline record spends on one child: its key (length and UTF-8), its tag byte,
    /// payload and priority.
    static func childSize<S>(keyBytes: Int, _ l: LeafBytes<S>, _ p: Priority?) -> Int {
        var n = LogEntry.varintSize(keyBytes) + keyBytes + 1 + l.compactPayloadSize
        switch p {
        case nil: break
        case .number?: n += 8
        case .string(let s)?: n += LogEntry.stringSize(s)
        }
        return n
    }
}
