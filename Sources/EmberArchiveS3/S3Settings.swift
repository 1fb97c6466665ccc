import EmberStorage
import Foundation

/// `s3://bucket/prefix`: where in an S3-compatible object store the archive's objects live.
public struct S3Location: Sendable, Equatable, CustomStringConvertible {
    public var bucket: String
    /// "" or a key prefix ending in `/` (every object is `prefix + name`).
    public var prefix: String

    public static let scheme = "s3://"

    public init(bucket: String, prefix: String) {
        self.bucket = bucket
        self.prefix = prefix
    }

    /// Parses `s3://bucket[/prefix]`. Bucket names follow S3's rules (3-63 of a-z, 0-9, `.`,
    /// `-`); a prefix may hold RFC 3986's unreserved characters and `/`, so the key in the URL
    /// is the key signed (no encoding differences between clients and servers).
    public static func parse(_ text: String) throws(ArchiveError) -> S3Location {
        guard text.hasPrefix(scheme) else { throw ArchiveError("\(text) is not an s3:// location") }
        let rest = text.dropFirst(scheme.count)
        let bucket = String(rest.prefix { $0 != "/" })
        var prefix = String(rest.dropFirst(bucket.count).drop { $0 == "/" })
        let bucketOK = (3...63).contains(bucket.count)
            && bucket.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "." || $0 == "-") }
        guard bucketOK else { throw ArchiveError("bad S3 bucket name \"\(bucket)\" in \(text) (3-63 of a-z, 0-9, . and -)") }
        guard prefix.utf8.count <= maxPrefixBytes,
              prefix.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.~/".contains($0)) }),
              !prefix.contains("//") else {
            throw ArchiveError("bad S3 key prefix \"\(prefix)\" in \(text) (at most \(maxPrefixBytes) of A-Z, a-z, 0-9, - _ . ~ and single /)")
        }
        if !prefix.isEmpty && !prefix.hasSuffix("/") { prefix += "/" }
        return S3Location(bucket: bucket, prefix: prefix)
    }

    /// Object keys are at most 1024 bytes in S3; the names the archive adds are under 100.
    public static let maxPrefixBytes = 900

    public var description: String { Self.scheme + bucket + (prefix.isEmpty ? "" : "/" + prefix.dropLast()) }
}

/// How to reach the object store and sign for it: from flags, else from the environment
/// variables the AWS tools read (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`).
public struct S3Settings: Sendable, Equatable {
    public enum Addressing: String, Sendable, CaseIterable {
        /// `endpoint/bucket/key` (MinIO, Ceph, moto, most self-hosted stores).
        case path
        /// `bucket.endpoint/key` (AWS's own endpoints).
        case virtual
    }

    /// `scheme://host[:port]`.
    public var endpoint: String
    public var region: String
    public var credentials: SigV4.Credentials
    public var addressing: Addressing
    /// Bases larger than this are uploaded in parts of this size (S3's multipart upload).
    public var partBytes: Int

    /// S3's own bounds on a multipart upload's parts (the last part may be smaller) and count.
    public static let minPartBytes = 5 << 20
    public static let maxPartBytes = 5 << 30
    public static let maxParts = 10_000
    public static let defaultPartBytes = 8 << 20

    public init(endpoint: String, region: String, credentials: SigV4.Credentials, addressing: Addressing,
                partBytes: Int = S3Settings.defaultPartBytes) {
        self.endpoint = endpoint
        self.region = region
        self.credentials = credentials
        self.addressing = addressing
        self.partBytes = partBytes
    }

    /// Flags first, then the environment. `addressing` nil: path-style when an endpoint is
    /// given (self-hosted stores), virtual-hosted on AWS's endpoint.
    public static func resolve(endpoint: String?, region: String?, accessKeyID: String?, secretAccessKeyFile: String?,
                               addressing: String?, partBytes: Int? = nil,
                               environment: [String: String] = ProcessInfo.processInfo.environment) throws(ArchiveError) -> S3Settings {
        func env(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        }
        let region = region ?? env("AWS_REGION", "AWS_DEFAULT_REGION") ?? "us-east-1"
        guard !region.isEmpty, region.count <= 64, region.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
            throw ArchiveError("bad S3 region \"\(region)\"")
        }
        let given = endpoint ?? env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
        var url = "https://s3.\(region).amazonaws.com"
        if let given { url = try checkedEndpoint(given) }
        let mode: Addressing
        if let addressing {
            guard let m = Addressing(rawValue: addressing) else { throw ArchiveError("S3 addressing must be path or virtual, not \(addressing)") }
            mode = m
        } else {
            mode = given == nil ? .virtual : .path
        }
        guard let key = accessKeyID ?? env("AWS_ACCESS_KEY_ID") else {
            throw ArchiveError("an s3:// archive needs credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment, or --archive-s3-access-key-id and --archive-s3-secret-access-key-file")
        }
        var secret: String
        if let file = secretAccessKeyFile {
            guard let d = FileManager.default.contents(atPath: file), d.count <= 4096 else {
                throw ArchiveError("cannot read the S3 secret access key file \(file)")
            }
            secret = String(decoding: d, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        } else if let s = env("AWS_SECRET_ACCESS_KEY") {
            secret = s
        } else {
            throw ArchiveError("an s3:// archive needs AWS_SECRET_ACCESS_KEY in the environment or --archive-s3-secret-access-key-file")
        }
        guard !key.isEmpty, !secret.isEmpty else { throw ArchiveError("empty S3 credentials") }
        let part = partBytes ?? defaultPartBytes
        guard (minPartBytes...maxPartBytes).contains(part) else {
            throw ArchiveError("the S3 part size must be 5MiB to 5GiB (S3's bounds), not \(part) bytes")
        }
        return S3Settings(endpoint: url, region: region,
                          credentials: SigV4.Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: env("AWS_SESSION_TOKEN")),
                          addressing: mode, partBytes: part)
    }

    /// `http(s)://host[:port]`, nothing after it but an optional `/`.
    static func checkedEndpoint(_ e: String) throws(ArchiveError) -> String {
        let trimmed = e.hasSuffix("/") ? String(e.dropLast()) : e
        guard let u = URL(string: trimmed), let scheme = u.scheme, scheme == "http" || scheme == "https",
              let host = u.host, !host.isEmpty, u.path.isEmpty, u.query == nil, u.user == nil else {
            throw ArchiveError("bad S3 endpoint \(e): give http(s)://host[:port]")
        }
        return trimmed
    }
}
