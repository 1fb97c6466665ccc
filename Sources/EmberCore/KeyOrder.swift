/// Firebase key order (reference §3.1): keys that parse as 32-bit integers first, numerically
/// (equal numbers: shorter text first); then all other keys lexicographically.
///
/// Strings compare by UTF-8 bytes (code point order). The JS SDK compares UTF-16 code units; the
/// two differ only between astral characters and U+E000–U+FFFF. Byte order is what the storage
/// encoding preserves, so every component of Ember uses it.
public enum KeyOrder {
    /// Sentinels used by query bounds (never valid keys: they contain `[`).
    public static let minName = "[MIN_NAME]"
    public static let maxName = "[MAX_NAME]"

    /// The value of a key in the integer group, if it belongs there (JS `tryParseInt`:
    /// `^-?(0*)\d{1,10}$` within Int32).
    public static func int32Value(_ key: String) -> Int32? {
        let u = key.utf8
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
            return compareBytes(a, b)
        }
        if bi != nil { return 1 }
        return compareBytes(a, b)
    }

    @inlinable
    public static func less(_ a: String, _ b: String) -> Bool { compare(a, b) < 0 }

    /// Lexicographic UTF-8 byte comparison (Swift's `<` on String uses Unicode canonical order).
    public static func compareBytes(_ a: String, _ b: String) -> Int {
        var ia = a.utf8.makeIterator(), ib = b.utf8.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case let (x?, y?): if x != y { return x < y ? -1 : 1 }
            }
        }
    }
}
