import Foundation
import NIOCore

/// An incremental HTTP/1.1 response reader for the raw load generator: status code, the head up
/// to the blank line, then the body by `Content-Length`, `Transfer-Encoding: chunked`, or none
/// (1xx, 204, 304). Bodies are skipped as they arrive (only a non-2xx answer keeps a prefix, so
/// a run's errors can say what they were); responses may be split across reads or several may
/// arrive in one. Anything it does not understand is an error: the connection is then unusable.
struct RawHTTPResponseReader {
    /// Longest response head accepted (status line and headers); our servers send a few hundred bytes.
    static let maxHeadBytes = 16 * 1024
    /// Longest chunk-size line (hex size, extensions) or trailer line accepted.
    static let maxLineBytes = 1024
    /// Largest body accepted (as `collect(upTo: 1 << 20)` allowed before).
    static let maxBodyBytes = 1 << 20
    /// Bytes of a non-2xx body kept for the error message.
    static let keptBodyBytes = 300

    struct Response {
        var status: Int
        /// Close after this response (`Connection: close`).
        var close: Bool
        /// The start of the body for a non-2xx answer; empty otherwise.
        var bodyPrefix: String
    }

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    private enum State {
        case head
        /// `remaining` bytes of a `Content-Length` body.
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
    }

    /// Largest body accepted; a streamed response (`onBody`) may lift it.
    var maxBody = Self.maxBodyBytes
    /// When set, body bytes are handed here as they arrive (a streamed response read a piece at
    /// a time) instead of being skipped.
    var onBody: ((ByteBuffer) -> Void)?
    /// The status of the response being read (0 until its head is in).
    var status: Int { current.status }

    private var state = State.head
    /// Bytes of the buffer already searched for the head's end (no rescans of a split head).
    private var scanned = 0
    private var current = Response(status: 0, close: false, bodyPrefix: "")
    private var bodyBytes = 0

    /// The next complete response in `buffer` (its bytes consumed), or nil when more bytes are
    /// needed (what was read so far is consumed or remembered).
    mutating func next(_ buffer: inout ByteBuffer) throws -> Response? {
        while true {
            switch state {
            case .head:
                guard let headLength = try headEnd(buffer) else { return nil }
                let head = buffer.readSlice(length: headLength)!
                scanned = 0
                let (response, framing) = try Self.parseHead(head)
                current = response
                bodyBytes = 0
                switch framing {
                case .none:
                    // An interim 1xx answer precedes the real one: skip it.
                    if (100..<200).contains(response.status) { continue }
                    return finish()
                case .length(let n):
                    guard n <= maxBody else { throw Malformed(description: "body of \(n) bytes") }
                    if n == 0 { return finish() }
                    state = .fixed(remaining: n)
                case .chunked:
                    state = .chunkSize
                }
            case .fixed(let remaining):
                let n = min(remaining, buffer.readableBytes)
                guard n > 0 else { return nil }
                take(&buffer, n)
                if remaining == n { return finish() }
                state = .fixed(remaining: remaining - n)
            case .chunkSize:
                guard let line = try readLine(&buffer) else { return nil }
                // The size is hex, optionally followed by `;extensions`.
                let hex = line.prefix { $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
                guard !hex.isEmpty, hex.count <= 8, let size = Int(String(decoding: hex, as: UTF8.self), radix: 16) else {
                    throw Malformed(description: "bad chunk size line")
                }
                guard bodyBytes + size <= maxBody else { throw Malformed(description: "chunked body over the limit") }
                state = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let n = min(remaining, buffer.readableBytes)
                guard n > 0 else { return nil }
                take(&buffer, n)
                state = remaining == n ? .chunkDataEnd : .chunkData(remaining: remaining - n)
            case .chunkDataEnd:
                guard buffer.readableBytes >= 2 else { return nil }
                guard buffer.readInteger(as: UInt16.self) == 0x0D0A else { throw Malformed(description: "chunk not followed by CRLF") }
                state = .chunkSize
            case .trailers:
                guard let line = try readLine(&buffer) else { return nil }
                if line.isEmpty { return finish() }
            }
        }
    }

    private mutating func finish() -> Response {
        state = .head
        return current
    }

    /// Consumes `n` body bytes, keeping the start of a non-2xx body.
    private mutating func take(_ buffer: inout ByteBuffer, _ n: Int) {
        let bytes = buffer.readSlice(length: n)!
        if let onBody {
            onBody(bytes)
        } else if !(200..<300).contains(current.status) && current.bodyPrefix.utf8.count < Self.keptBodyBytes {
            current.bodyPrefix += String(buffer: bytes.getSlice(at: bytes.readerIndex, length: min(n, Self.keptBodyBytes))!)
        }
        bodyBytes += n
    }

    /// The head's length including the blank line, once it is all in `buffer`.
    private mutating func headEnd(_ buffer: ByteBuffer) throws -> Int? {
        let found: Int? = buffer.withUnsafeReadableBytes { b in
            // Resume 3 bytes back: the CRLFCRLF may straddle the previous read's end.
            var i = max(0, scanned - 3)
            while i + 4 <= b.count {
                if b[i + 3] == 0x0A && b[i] == 0x0D && b[i + 1] == 0x0A && b[i + 2] == 0x0D { return i + 4 }
                i += 1
            }
            return nil
        }
        if let found {
            guard found <= Self.maxHeadBytes else { throw Malformed(description: "response head over \(Self.maxHeadBytes) bytes") }
            return found
        }
        guard buffer.readableBytes <= Self.maxHeadBytes else { throw Malformed(description: "response head over \(Self.maxHeadBytes) bytes") }
        scanned = buffer.readableBytes
        return nil
    }

    /// One CRLF-terminated line (without the CRLF), or nil until it is all there.
    private func readLine(_ buffer: inout ByteBuffer) throws -> [UInt8]? {
        let view = buffer.readableBytesView
        guard let lf = view.firstIndex(of: 0x0A) else {
            guard view.count <= Self.maxLineBytes else { throw Malformed(description: "line over \(Self.maxLineBytes) bytes") }
            return nil
        }
        let length = lf - view.startIndex
        guard length >= 1, length <= Self.maxLineBytes, view[lf - 1] == 0x0D else { throw Malformed(description: "bad line ending") }
        let line = buffer.readBytes(length: length + 1)!
        return Array(line.dropLast(2))
    }

    enum Framing: Equatable {
        case none
        case length(Int)
        case chunked
    }

    /// Status line and the framing headers of a complete head (blank line included). Byte-level:
    /// the String/Foundation version of this was two thirds of the generator's CPU.
    static func parseHead(_ head: ByteBuffer) throws -> (Response, Framing) {
        var status = 0
        var length: Int?
        var chunked = false
        var close = false
        try head.withUnsafeReadableBytes { b in
            // "HTTP/1.1 204 No Content": version, three digits, then a space or the line's end.
            func byte(_ i: Int) -> UInt8 { i < b.count ? b[i] : 0 }
            let prefix: StaticString = "HTTP/1."
            var ok = b.count >= 14 && (0..<7).allSatisfy { b[$0] == prefix.utf8Start[$0] } && b[8] == 0x20
            for i in 9..<12 where ok {
                ok = b[i] >= 0x30 && b[i] <= 0x39
                status = status * 10 + Int(b[i] &- 0x30)
            }
            guard ok, status >= 100, byte(12) == 0x20 || byte(12) == 0x0D else {
                throw Malformed(description: "bad status line '\(String(decoding: b.prefix(80), as: UTF8.self))'")
            }
            var i = 0
            while b[i] != 0x0A { i += 1 }
            i += 1
            // Header lines until the blank one (the head is known to end with CRLFCRLF).
            while true {
                var end = i
                while b[end] != 0x0A { end += 1 }
                guard end > i, b[end - 1] == 0x0D else { throw Malformed(description: "bad header line ending") }
                if end - 1 == i { break }  // the blank line
                let line = UnsafeRawBufferPointer(rebasing: b[i..<(end - 1)])
                i = end + 1
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw Malformed(description: "header line without ':'") }
                let name = UnsafeRawBufferPointer(rebasing: line[..<colon])
                var value = line[(colon + 1)...]
                while let f = value.first, f == 0x20 || f == 0x09 { value = value.dropFirst() }
                while let l = value.last, l == 0x20 || l == 0x09 { value = value.dropLast() }
                if Self.equalsLowercased(name, "content-length") {
                    guard !value.isEmpty, value.count <= 18, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                        throw Malformed(description: "bad Content-Length")
                    }
                    let n = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                    guard length == nil || length == n else { throw Malformed(description: "two Content-Lengths") }
                    length = n
                } else if Self.equalsLowercased(name, "transfer-encoding") {
                    // Only chunked alone is understood.
                    guard Self.equalsLowercased(UnsafeRawBufferPointer(rebasing: value), "chunked") else {
                        throw Malformed(description: "Transfer-Encoding '\(String(decoding: value, as: UTF8.self))'")
                    }
                    chunked = true
                } else if Self.equalsLowercased(name, "connection") {
                    for token in value.split(separator: UInt8(ascii: ",")) {
                        var t = token[...]
                        while let f = t.first, f == 0x20 || f == 0x09 { t = t.dropFirst() }
                        while let l = t.last, l == 0x20 || l == 0x09 { t = t.dropLast() }
                        if Self.equalsLowercased(UnsafeRawBufferPointer(rebasing: t), "close") { close = true }
                    }
                }
            }
        }
        let response = Response(status: status, close: close, bodyPrefix: "")
        if (100..<200).contains(status) || status == 204 || status == 304 { return (response, .none) }
        if chunked {
            guard length == nil else { throw Malformed(description: "both Content-Length and chunked") }
            return (response, .chunked)
        }
        // A body delimited by the connection's close cannot be told from a dropped connection.
        guard let length else { throw Malformed(description: "response without Content-Length or chunked coding") }
        return (response, .length(length))
    }

    /// Whether `bytes`, ASCII-lowercased, are `lower` (a lowercase literal).
    private static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ lower: StaticString) -> Bool {
        guard bytes.count == lower.utf8CodeUnitCount else { return false }
        for i in 0..<bytes.count {
            let c = bytes[i]
            if (c >= 0x41 && c <= 0x5A ? c | 0x20 : c) != lower.utf8Start[i] { return false }
        }
        return true
    }
}
