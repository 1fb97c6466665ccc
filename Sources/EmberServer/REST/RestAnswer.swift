import EmberCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// A REST answer's status, header fields and body, rendered in one place for the three paths that
/// answer REST requests — Hummingbird's (`RestHandler`, as a `Response`), the event-loop fast path
/// (`RestFastPath`, as HTTPTypes parts) and the byte-level one (`RawRestFastPath` through
/// `RawAnswers`, as bytes) — so they answer alike byte for byte (test_rest_fast_path.py compares).
struct RestAnswer {
    var status: HTTPResponse.Status
    var headers: HTTPFields
    var body: ByteBuffer?

    /// The CORS fields of answers a browser may preflight (`OPTIONS`, 204s, 304s).
    static let allowedMethods = "GET, PUT, POST, PATCH, DELETE, OPTIONS"
    static let allowedHeaders = "Content-Type, Authorization, X-Firebase-ETag, If-Match, If-None-Match"

    /// The fields of a JSON answer (also a streamed read's, whose body comes in chunks).
    static var jsonHeaders: HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-cache"
        headers[.accessControlAllowOrigin] = "*"
        return headers
    }

    static func json(_ value: JSON, pretty: Bool, status: HTTPResponse.Status = .ok) -> RestAnswer {
        RestAnswer(status: status, headers: jsonHeaders, body: ByteBuffer(bytes: jsonBody(value, pretty: pretty)))
    }

    /// A JSON answer's body (a pretty one ends with a newline).
    static func jsonBody(_ value: JSON, pretty: Bool) -> [UInt8] {
        var bytes = value.serializedBytes(pretty: pretty)
        if pretty { bytes.append(0x0A) }
        return bytes
    }

    /// JSON already serialized (the rules document, as stored).
    static func jsonText(_ text: String) -> RestAnswer {
        RestAnswer(status: .ok, headers: jsonHeaders, body: ByteBuffer(string: text))
    }

    /// A failure: its status and `{"error": ...}`.
    static func error(_ e: RestError) -> RestAnswer {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.accessControlAllowOrigin] = "*"
        return RestAnswer(status: HTTPResponse.Status(code: e.status), headers: headers, body: ByteBuffer(string: e.body))
    }

    static func error(_ error: any Error) -> RestAnswer {
        var answer = self.error(restError(error))
        // A member catching up serves soon: say when to ask again.
        if error is CatchingUp { answer.headers[.retryAfter] = String(CatchingUp.retryAfterSeconds) }
        return answer
    }

    /// The status and `{"error": ...}` a failure is answered with.
    static func restError(_ error: any Error) -> RestError {
        switch error {
        case let e as RestError: return e
        case let e as EmberError: return RestError(e)
        case let e as StoreUnavailable: return RestError(503, e.message)
        case let e as CatchingUp: return RestError(503, e.message)
        case let e as StoreRefusal: return RestError(e.status, e.message)
        case is PermissionDenied: return RestError(401, PermissionDenied.message)
        default: return RestError(500, "Internal error: \(error)")
        }
    }

    /// 204 with no body (`print=silent`, `OPTIONS`).
    static func noContent() -> RestAnswer {
        RestAnswer(status: .noContent, headers: HTTPFields(), body: nil).withCORS()
    }

    /// 304 for a GET whose `If-None-Match` names the current ETag.
    static func notModified(etag: String) -> RestAnswer {
        var headers = HTTPFields()
        headers[.eTag] = etag
        return RestAnswer(status: .notModified, headers: headers, body: nil).withCORS()
    }

    func withCORS() -> RestAnswer {
        var a = self
        a.headers[.accessControlAllowOrigin] = "*"
        a.headers[.accessControlAllowMethods] = Self.allowedMethods
        a.headers[.accessControlAllowHeaders] = Self.allowedHeaders
        return a
    }

    /// For Hummingbird, which adds `Content-Length`, `Date` and `Server` itself.
    var response: Response {
        guard let body else { return Response(status: status, headers: headers) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// For the fast paths, which write the answer themselves: with `Content-Length`, `Date` and
    /// `Server` as Hummingbird adds them.
    var parts: (HTTPResponse, ByteBuffer?) {
        var headers = headers
        if let body { headers[.contentLength] = String(body.readableBytes) }
        headers[.date] = HTTPDate.now()
        headers[.server] = "Ember"
        return (HTTPResponse(status: status, headerFields: headers), body)
    }
}

/// The `Date` header's text (RFC 9110 IMF-fixdate), made once per second.
enum HTTPDate {
    private static let cache = Mutex<(second: Int, text: String)>((-1, ""))

    static func now() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let second = ts.tv_sec
        return cache.withLock { c in
            if c.second == second { return c.text }
            var t = tm()
            var s = time_t(second)
            gmtime_r(&s, &t)
            let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
            let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            let text = String(format: "%@, %02d %@ %04d %02d:%02d:%02d GMT", days[Int(t.tm_wday)], t.tm_mday, months[Int(t.tm_mon)],
                              Int(t.tm_year) + 1900, t.tm_hour, t.tm_min, t.tm_sec)
            c = (second, text)
            return text
        }
    }
}
