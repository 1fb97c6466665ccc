import EmberCore
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1

/// `RawRestFastPath`'s answers as bytes. Nearly every write is answered with one of two shapes —
/// 204 for `print=silent`, 200 with the JSON echo — which are written from templates (made from
/// `RestAnswer`'s rendering itself, once per second for the `Date` line) instead of building header
/// fields per answer; anything else is rendered by `RestAnswer` and encoded.
/// One per connection (event loop only).
struct RawAnswers {
    private var second = -1
    /// The head of a 200 JSON answer up to its Content-Length value, for `second`.
    private var jsonHead = ByteBuffer()
    /// What follows that value to the end of the head (the `Date` and `Server` lines), for `second`.
    private var jsonTail = ByteBuffer()
    /// The whole 204 answer for `second`.
    private var silent = ByteBuffer()

    /// Writes `reply` to `out`; returns its status code.
    mutating func write(_ reply: FastWriteQueue.Reply, into out: inout ByteBuffer) -> Int {
        switch reply {
        case .silent:
            refresh()
            out.writeImmutableBuffer(silent)
            return 204
        case .json(let value, let pretty, let status) where status == .ok:
            refresh()
            let body = RestAnswer.jsonBody(value, pretty: pretty)
            out.writeImmutableBuffer(jsonHead)
            out.writeString(String(body.count))
            out.writeImmutableBuffer(jsonTail)
            out.writeBytes(body)
            return 200
        default:
            let answer = reply.answer
            Self.encode(answer.parts, into: &out)
            return answer.status.code
        }
    }

    /// Re-renders the templates when the second (the `Date` header) changed.
    private mutating func refresh() {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        guard ts.tv_sec != second else { return }
        second = ts.tv_sec
        // A 200 answer rendered whole, split around its Content-Length value (the one field that
        // differs between answers of that second).
        var rendered = ByteBuffer()
        Self.encode(RestAnswer.json(.null, pretty: false).parts, into: &rendered)
        let text = String(buffer: rendered)
        guard let length = text.range(of: "\r\nContent-Length: "),
              let valueEnd = text.range(of: "\r\n", range: length.upperBound..<text.endIndex)?.lowerBound,
              let headEnd = text.range(of: "\r\n\r\n") else {
            preconditionFailure("a rendered JSON answer has a Content-Length and a head")
        }
        jsonHead = ByteBuffer(substring: text[..<length.upperBound])
        jsonTail = ByteBuffer(substring: text[valueEnd..<headEnd.upperBound])
        silent = ByteBuffer()
        Self.encode(RestAnswer.noContent().parts, into: &silent)
    }
}

extension RawAnswers {
    /// An answer as HTTP/1.1 bytes: what NIO's response encoder writes for the same HTTPTypes
    /// response (status line with the reason phrase, the fields in order as named, then the body).
    static func encode(_ response: (HTTPResponse, ByteBuffer?), into out: inout ByteBuffer) {
        let (head, body) = response
        out.writeStaticString("HTTP/1.1 ")
        out.writeString(String(head.status.code))
        out.writeStaticString(" ")
        // A status made from a bare code has no phrase; NIO's encoder then writes the standard one.
        let reason = head.status.reasonPhrase
        out.writeString(reason.isEmpty ? HTTPResponseStatus(statusCode: head.status.code).reasonPhrase : reason)
        out.writeStaticString("\r\n")
        for field in head.headerFields {
            out.writeString(field.name.rawName)
            out.writeStaticString(": ")
            out.writeString(field.value)
            out.writeStaticString("\r\n")
        }
        out.writeStaticString("\r\n")
        if let body { out.writeImmutableBuffer(body) }
    }
}
