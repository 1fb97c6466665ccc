/// The head of an HTTP/1.1 request read straight from a connection's bytes, for the requests the
/// node's byte-level REST front (`RawRestFastPath`) can take: plain data writes. It only has to
/// recognise those exactly; any head it does not fully understand is `.other`, and the request
/// goes to the full HTTP stack (NIO's parser, Hummingbird), which answers it or refuses it as
/// always. So the rules here are strict (RFC 9112 grammar, no leniency): a request line
/// `METHOD SP target SP HTTP/1.1`, header lines `name: value` with a token name, one
/// `Content-Length` of digits, CRLF line ends.
public struct RawWriteHead: Sendable {
    public enum Method: Sendable { case put, patch, post, delete }

    public let method: Method
    public let request: RestRequest
    /// Bytes of the request line and headers, through the blank line.
    public let headLength: Int
    public let contentLength: Int
    /// The request's `Authorization` header, the only one judging a write reads.
    public let authorization: String?

    public enum Parse: Sendable {
        /// The head has not fully arrived.
        case incomplete
        /// Not a write this path takes (or not a head it understands): the full stack's.
        case other
        case write(RawWriteHead)
    }

    /// Largest body taken (larger writes go to the full stack, which applies the node's limit).
    public static let maxBodyBytes = 64 * 1024
    /// Longest head looked at; a longer one goes to the full stack (whose limit answers 414).
    public static let maxHeadBytes = 16 * 1024

    public static func parse(_ bytes: [UInt8]) -> Parse {
        bytes.withUnsafeBytes { parse($0) }
    }

    public static func parse(_ b: UnsafeRawBufferPointer) -> Parse {
        guard let end = headEnd(b) else { return b.count > maxHeadBytes ? .other : .incomplete }
        // Request line.
        guard let requestLineEnd = lineEnd(b, from: 0, to: end + 1), let sp1 = index(of: 0x20, in: b, from: 0, to: requestLineEnd),
              let sp2 = index(of: 0x20, in: b, from: sp1 + 1, to: requestLineEnd), sp2 > sp1 + 1,
              equals(b, sp2 + 1, requestLineEnd, "HTTP/1.1") else { return .other }
        let method: Method
        if equals(b, 0, sp1, "PUT") { method = .put }
        else if equals(b, 0, sp1, "PATCH") { method = .patch }
        else if equals(b, 0, sp1, "POST") { method = .post }
        else if equals(b, 0, sp1, "DELETE") { method = .delete }
        else { return .other }
        guard b[sp1 + 1] == UInt8(ascii: "/") else { return .other }
        let target = String(decoding: UnsafeRawBufferPointer(rebasing: b[(sp1 + 1)..<sp2]), as: UTF8.self)
        // Headers.
        var contentLength: Int?
        var authorization: String?
        var at = requestLineEnd + 2
        while at < end {
            guard let e = lineEnd(b, from: at, to: end + 2), let colon = index(of: UInt8(ascii: ":"), in: b, from: at, to: e),
                  colon > at, isToken(b, at, colon) else { return .other }
            var vs = colon + 1, ve = e
            while vs < ve && (b[vs] == 0x20 || b[vs] == 0x09) { vs += 1 }
            while ve > vs && (b[ve - 1] == 0x20 || b[ve - 1] == 0x09) { ve -= 1 }
            for i in vs..<ve where b[i] < 0x20 && b[i] != 0x09 { return .other }
            switch colon - at {
            case 14 where equalsLowercased(b, at, colon, "content-length"):
                guard contentLength == nil, ve > vs, ve - vs <= 6 else { return .other }
                var n = 0
                for i in vs..<ve {
                    guard b[i] >= 0x30 && b[i] <= 0x39 else { return .other }
                    n = n * 10 + Int(b[i] - 0x30)
                }
                contentLength = n
            case 13 where equalsLowercased(b, at, colon, "authorization"):
                guard authorization == nil else { return .other }  // repeated: the full stack's
                authorization = String(decoding: UnsafeRawBufferPointer(rebasing: b[vs..<ve]), as: UTF8.self)
            case 10 where equalsLowercased(b, at, colon, "connection"):
                guard equalsLowercased(b, vs, ve, "keep-alive") else { return .other }
            case 6 where equalsLowercased(b, at, colon, "expect"),
                 7 where equalsLowercased(b, at, colon, "upgrade"),
                 8 where equalsLowercased(b, at, colon, "if-match"),
                 15 where equalsLowercased(b, at, colon, "x-firebase-etag"),
                 17 where equalsLowercased(b, at, colon, "transfer-encoding"),
                 22 where equalsLowercased(b, at, colon, "x-http-method-override"):
                // Conditional writes, method overrides, streamed bodies and upgrades: the full stack's.
                return .other
            default:
                break
            }
            at = e + 2
        }
        let length = contentLength ?? 0
        guard length <= maxBodyBytes, let req = RestRequest.plainDataWrite(uri: target) else { return .other }
        return .write(RawWriteHead(method: method, request: req, headLength: end + 4, contentLength: length,
                                   authorization: authorization))
    }

    /// Where the blank line ending the head starts (the index of its CRLFCRLF), if it has arrived.
    private static func headEnd(_ b: UnsafeRawBufferPointer) -> Int? {
        let n = min(b.count, maxHeadBytes + 4)
        guard n >= 4 else { return nil }
        var i = 0
        while i + 3 < n {
            if b[i + 3] != 0x0A { i += b[i + 3] == 0x0D ? 1 : 4; continue }  // skip ahead: no LF there
            if b[i] == 0x0D && b[i + 1] == 0x0A && b[i + 2] == 0x0D { return i }
            i += 1
        }
        return nil
    }

    /// The CR of the CRLF ending the line that starts at `from`, before `to`.
    private static func lineEnd(_ b: UnsafeRawBufferPointer, from: Int, to: Int) -> Int? {
        var i = from
        while i < to {
            if b[i] == 0x0D { return i + 1 < b.count && b[i + 1] == 0x0A ? i : nil }
            if b[i] == 0x0A { return nil }  // a bare LF: not for this strict reader
            i += 1
        }
        return nil
    }

    private static func index(of byte: UInt8, in b: UnsafeRawBufferPointer, from: Int, to: Int) -> Int? {
        var i = from
        while i < to {
            if b[i] == byte { return i }
            i += 1
        }
        return nil
    }

    private static func equals(_ b: UnsafeRawBufferPointer, _ from: Int, _ to: Int, _ s: StaticString) -> Bool {
        guard to - from == s.utf8CodeUnitCount else { return false }
        let p = s.utf8Start
        for i in 0..<(to - from) where b[from + i] != p[i] { return false }
        return true
    }

    /// ASCII case-insensitive comparison with a lowercase literal.
    private static func equalsLowercased(_ b: UnsafeRawBufferPointer, _ from: Int, _ to: Int, _ s: StaticString) -> Bool {
        guard to - from == s.utf8CodeUnitCount else { return false }
        let p = s.utf8Start
        for i in 0..<(to - from) {
            var c = b[from + i]
            if c >= 0x41 && c <= 0x5A { c |= 0x20 }
            if c != p[i] { return false }
        }
        return true
    }

    /// RFC 9110 token characters (a header name).
    private static func isToken(_ b: UnsafeRawBufferPointer, _ from: Int, _ to: Int) -> Bool {
        for i in from..<to {
            let c = b[i]
            switch c {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: continue
            case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
                 UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): continue
            default: return false
            }
        }
        return true
    }
}
