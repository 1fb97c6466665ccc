/// Whether bytes are well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
/// U+10FFFF), without making a `String`: what `String(validating:as: UTF8.self)` accepts. The
/// streaming reader checks every non-ASCII string of an import with it (a `String` per value was
/// a share of `ember import`'s CPU).
public enum UTF8Check {
    public static func isValid(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = b.count
        var i = 0
        while i < n {
            let c = b[i]
            if c < 0x80 { i += 1; continue }
            if c < 0xC2 { return false }  // a continuation byte, or an overlong two-byte form
            if c < 0xE0 {
                guard i + 1 < n, isContinuation(b[i + 1]) else { return false }
                i += 2
                continue
            }
            if c < 0xF0 {
                guard i + 2 < n else { return false }
                // E0: no overlong forms; ED: no surrogates (U+D800...U+DFFF).
                let lo: UInt8 = c == 0xE0 ? 0xA0 : 0x80, hi: UInt8 = c == 0xED ? 0x9F : 0xBF
                guard b[i + 1] >= lo, b[i + 1] <= hi, isContinuation(b[i + 2]) else { return false }
                i += 3
                continue
            }
            if c < 0xF5 {
                guard i + 3 < n else { return false }
                // F0: no overlong forms; F4: nothing past U+10FFFF.
                let lo: UInt8 = c == 0xF0 ? 0x90 : 0x80, hi: UInt8 = c == 0xF4 ? 0x8F : 0xBF
                guard b[i + 1] >= lo, b[i + 1] <= hi, isContinuation(b[i + 2]), isContinuation(b[i + 3]) else { return false }
                i += 4
                continue
            }
            return false
        }
        return true
    }

    @inline(__always)
    static func isContinuation(_ c: UInt8) -> Bool { c & 0xC0 == 0x80 }
}
