import Crypto
import Foundation

/// AWS Signature Version 4 (the `Authorization` header form), as AWS documents it: a canonical
/// request, a string to sign over its SHA-256, and an HMAC-SHA256 chain from the secret key
/// through the date, region and service. Pure: the time is an input.
public struct SigV4: Sendable {
    public struct Credentials: Sendable, Equatable {
        public var accessKeyID: String
        public var secretAccessKey: String
        /// Temporary credentials (STS) carry a session token, sent as `x-amz-security-token`.
        public var sessionToken: String?

        public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.sessionToken = sessionToken
        }
    }

    public static let algorithm = "AWS4-HMAC-SHA256"
    /// The payload hash of an empty body.
    public static let emptyPayloadHash = hex(SHA256.hash(data: [UInt8]()))

    public var credentials: Credentials
    public var region: String
    public var service: String

    public init(credentials: Credentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// `20130524T000000Z` (the `x-amz-date` header) for ms since 1970.
    public static func amzDate(_ ms: Int64) -> String {
        var t = time_t(ms / 1000)
        var u = tm()
        gmtime_r(&t, &u)
        func p(_ v: Int32, _ w: Int) -> String { String(repeating: "0", count: max(0, w - String(v).count)) + String(v) }
        return "\(p(u.tm_year + 1900, 4))\(p(u.tm_mon + 1, 2))\(p(u.tm_mday, 2))T\(p(u.tm_hour, 2))\(p(u.tm_min, 2))\(p(u.tm_sec, 2))Z"
    }

    /// RFC 3986 percent-encoding of everything but the unreserved characters (`/` kept in paths).
    public static func uriEncode(_ s: String, keepSlash: Bool) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                let h = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [h[Int(b >> 4)], h[Int(b & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    /// The canonical query string: names and values encoded, sorted by name then value.
    public static func canonicalQuery(_ query: [(String, String)]) -> String {
        query.map { (uriEncode($0.0, keepSlash: false), uriEncode($0.1, keepSlash: false)) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// What a signature covers, with the header to send.
    public struct Signed: Sendable, Equatable {
        public var canonicalRequest: String
        public var stringToSign: String
        public var signature: String
        public var authorization: String
    }

    /// Signs a request. `path` is the encoded canonical URI (S3 encodes each key once: no
    /// normalization), `headers` every header to sign (`host` and `x-amz-date` among them),
    /// `payloadHash` the hex SHA-256 of the body (or `UNSIGNED-PAYLOAD`).
    public func sign(method: String, path: String, query: [(String, String)], headers: [(String, String)],
                     payloadHash: String, amzDate: String) -> Signed {
        let canonicalHeaders = headers.map { (name: $0.0.lowercased(), value: Self.trimmed($0.1)) }
            .sorted { $0.name < $1.name }
        let signedHeaders = canonicalHeaders.map(\.name).joined(separator: ";")
        let canonicalRequest = [
            method, path, Self.canonicalQuery(query),
            canonicalHeaders.map { "\($0.name):\($0.value)\n" }.joined(),
            signedHeaders, payloadHash,
        ].joined(separator: "\n")
        let date = String(amzDate.prefix(8))
        let scope = "\(date)/\(region)/\(service)/aws4_request"
        let stringToSign = [Self.algorithm, amzDate, scope, Self.hex(SHA256.hash(data: Array(canonicalRequest.utf8)))]
            .joined(separator: "\n")
        let signature = Self.hex(HMAC<SHA256>.authenticationCode(for: Array(stringToSign.utf8), using: signingKey(date: date)))
        let authorization = "\(Self.algorithm) Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return Signed(canonicalRequest: canonicalRequest, stringToSign: stringToSign, signature: signature, authorization: authorization)
    }

    /// kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request").
    public func signingKey(date: String) -> SymmetricKey {
        var key = SymmetricKey(data: Array(("AWS4" + credentials.secretAccessKey).utf8))
        for part in [date, region, service, "aws4_request"] {
            key = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array(part.utf8), using: key)))
        }
        return key
    }

    /// Header values: outer spaces trimmed, inner runs of spaces made one.
    static func trimmed(_ v: String) -> String {
        v.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }

    public static func hex<D: Sequence>(_ d: D) -> String where D.Element == UInt8 {
        let h = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in d { out.append(h[Int(b >> 4)]); out.append(h[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    public static func sha256Hex(_ bytes: [UInt8]) -> String { hex(SHA256.hash(data: bytes)) }
}
