/// Percent-decoding as Firebase clients need it: `%XX` decoded, `+` left as a literal plus
/// (Python sends `+` inside JSON strings unescaped; JS sends `%2B`). Reference §1.1, §1.3.
public enum PercentDecoding {
    public static func decode(_ s: Substring) -> String? {
        guard s.utf8.contains(UInt8(ascii: "%")) else { return String(s) }
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "%") {
                guard it.count >= 2, let h = hex(it[it.startIndex]), let l = hex(it[it.startIndex + 1]) else { return nil }
                out.append(h << 4 | l)
                it = it.dropFirst(2)
            } else {
                out.append(c)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 65...70: return c - 55
        case 97...102: return c - 87
        default: return nil
        }
    }

    /// Splits a raw query string into decoded (name, value) pairs, in order.
    public static func queryItems(_ query: Substring) -> [(String, String)]? {
        var items: [(String, String)] = []
        // Split by Unicode scalar: a combining mark after `&` or `=` would join it into one Character.
        for part in query.unicodeScalars.split(separator: "&", omittingEmptySubsequences: true) {
            let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(Substring(kv[0])) else { return nil }
            let value = kv.count > 1 ? decode(Substring(kv[1])) : ""
            guard let value else { return nil }
            items.append((name, value))
        }
        return items
    }
}
