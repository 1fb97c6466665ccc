/// Firebase key order (reference §3.1): keys that parse as 32-bit integers first, numerically
/// (equal numbers: shorter text first); then all other keys lexicographically.
///
/// Strings compare by UTF-16 code units, as the JS SDK (`a < b`) and Java's `compareTo` do: a
/// client that orders a query's window itself must agree with the server on every character.
/// UTF-16 order differs from code point (UTF-8 byte) order only in that characters above U+FFFF
/// (surrogate pairs, 0xD800…) sort before U+E000–U+FFFF. `textOrderByte` turns UTF-8 bytes into
/// bytes whose plain order is UTF-16 order; the storage encoding stores keys through it.
public enum KeyOrder {
    /// Sentinels used by query bounds (never valid keys: they contain `[`).
    public static let minName = "[MIN_NAME]"
    public static let maxName = "[MAX_NAME]"

    /// The value of a key in the integer group, if it belongs there (JS `tryParseInt`:
    /// `^-?(0*)\d{1,10}$` within Int32).
    public static func int32Value(_ key: String) -> Int32? { int32Value(utf8: key.utf8) }

    /// `int32Value` of the key whose UTF-8 is `u` (a key read from text without its `String`).
    @inlinable
    public static func int32Value<C: Collection>(utf8 u: C) -> Int32? where C.Element == UInt8 {
        var i = u.startIndex
        var negative = false
        if i != u.endIndex && u[i] == UInt8(ascii: "-") { negative = true; i = u.index(after: i) }
        // Leading zeros are free; at most 10 significant digits follow.
        var digits = 0
        var sawDigit = false
        var value: Int64 = 0
        var leading = true
        while i != u.endIndex {
            let c = u[i]
            guard c >= 48 && c <= 57 else { return nil }
            sawDigit = true
            if leading && c == 48 {
                // still a leading zero; the regex lets `0*` absorb these
            } else {
                leading = false
                digits += 1
                if digits > 10 { return nil }
                value = value * 10 + Int64(c - 48)
            }
            i = u.index(after: i)
        }
        guard sawDigit else { return nil }
        if negative { value = -value }
        guard value >= Int64(Int32.min) && value <= Int64(Int32.max) else { return nil }
        return Int32(value)
    }

    /// Negative, zero or positive like JS `nameCompare`.
    public static func compare(_ a: String, _ b: String) -> Int {
        // Byte equality: Swift's `==` on String is canonical equivalence ("é" == "e\u{301}").
        if a.utf8.elementsEqual(b.utf8) { return 0 }
        if a == minName || b == maxName { return -1 }
        if b == minName || a == maxName { return 1 }
        let ai = int32Value(a), bi = int32Value(b)
        if let ai {
            guard let bi else { return -1 }
            if ai != bi { return ai < bi ? -1 : 1 }
            let la = a.utf8.count, lb = b.utf8.count
            if la != lb { return la < lb ? -1 : 1 }
            return compareText(a, b)
        }
        if bi != nil { return 1 }
        return compareText(a, b)
    }

    @inlinable
    public static func less(_ a: String, _ b: String) -> Bool { compare(a, b) < 0 }

    /// A JSON object's members in `less` order of their keys (keys distinct by bytes), each key's
    /// integer group parsed once instead of at every comparison (`compare` parses both keys each
    /// time): encoding a log entry sorts every object's members. The order is exactly `less`'s;
    /// keys that are the query sentinels take `less` itself. Not generic: a generic version is not
    /// specialized across modules, and unspecialized it cost a leader 26 % of its samples.
    public static func sortedByKey(_ members: KeyMap<JSON>) -> [(key: String, value: JSON)] {
        if members.count < 2 { return Array(members) }
        var tagged: [(int: Int32?, member: (key: String, value: JSON))] = []
        tagged.reserveCapacity(members.count)
        for m in members {
            if m.key == minName || m.key == maxName { return members.sorted { less($0.key, $1.key) } }
            tagged.append((int: int32Value(m.key), member: m))
        }
        tagged.sort { a, b in
            switch (a.int, b.int) {
            case let (x?, y?):
                if x != y { return x < y }
                let la = a.member.key.utf8.count, lb = b.member.key.utf8.count
                if la != lb { return la < lb }
                return compareText(a.member.key, b.member.key) < 0
            case (.some, nil): return true
            case (nil, .some): return false
            case (nil, nil): return compareText(a.member.key, b.member.key) < 0
            }
        }
        return tagged.map { $0.member }
    }

    /// UTF-16 code unit order of two strings, walked over their UTF-8 (no transcoding): at the
    /// first byte that differs, `textOrderByte` of each decides. Equal only when byte-equal
    /// (Swift's `<`/`==` on String use canonical equivalence instead).
    public static func compareText(_ a: String, _ b: String) -> Int {
        var ia = a.utf8.makeIterator(), ib = b.utf8.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case let (x?, y?):
                if x != y { return textOrderByte(x) < textOrderByte(y) ? -1 : 1 }
            }
        }
    }

    /// Appends bytes whose plain byte order is this order (`compare`) among valid keys: a key of
    /// the integer group as 0x01, its value's sign-flipped big-endian 32 bits, its UTF-8 length in
    /// two bytes (leading zeros are unbounded; keys are at most 768 bytes) and its UTF-8; any other
    /// as 0x02 and its text-order bytes (`textOrderByte`). Each ends in 0x00, which keys never
    /// contain, so the keys of a path written one after another order as paths do (`Path.<`).
    /// The storage's key encoding (`KeyCodec`) is this.
    public static func appendSortKey(_ key: String, to out: inout [UInt8]) {
        appendSortKey(utf8: key.utf8, to: &out)
    }

    /// `appendSortKey` of the key whose UTF-8 is `utf8`.
    @inlinable
    public static func appendSortKey<C: Collection>(utf8: C, to out: inout [UInt8]) where C.Element == UInt8 {
        if let n = int32Value(utf8: utf8) {
            out.append(0x01)
            let u = UInt32(bitPattern: n) ^ 0x8000_0000
            out.append(UInt8(u >> 24)); out.append(UInt8((u >> 16) & 0xFF))
            out.append(UInt8((u >> 8) & 0xFF)); out.append(UInt8(u & 0xFF))
            let n = utf8.count
            out.append(UInt8(n >> 8)); out.append(UInt8(n & 0xFF))
            out.append(contentsOf: utf8)
            out.append(0x00)
        } else {
            out.append(0x02)
            // The bytes copied at once, then the rare lead bytes 0xEE / 0xEF mapped in place: an
            // append per byte was most of encoding a write's key (every member, every write).
            let start = out.count
            out.append(contentsOf: utf8)
            for k in start..<out.count where out[k] >= 0xEE { out[k] = textOrderByte(out[k]) }
            out.append(0x00)
        }
    }

    /// A UTF-8 byte mapped so that byte order is UTF-16 code unit order: the lead bytes of
    /// U+E000–U+FFFF (0xEE, 0xEF) move past those of U+10000… (0xF0–0xF4), to 0xF5 and 0xF6, which
    /// valid UTF-8 never contains. Continuation bytes (0x80–0xBF) are never 0xEE/0xEF, and where two
    /// strings first differ both bytes are lead bytes or both continuation bytes of scalars with the
    /// same lead, where code point order is UTF-16 order; so comparing mapped bytes is exact.
    @inline(__always)
    public static func textOrderByte(_ b: UInt8) -> UInt8 {
        b == 0xEE ? 0xF5 : (b == 0xEF ? 0xF6 : b)
    }

    /// The inverse of `textOrderByte`.
    @inline(__always)
    public static func textByte(fromOrderByte b: UInt8) -> UInt8 {
        b == 0xF5 ? 0xEE : (b == 0xF6 ? 0xEF : b)
    }
}
