import AsyncHTTPClient
import EmberStorage
import Foundation
import NIOCore
import NIOHTTP1

/// The archive in an S3-compatible object store (AWS S3, MinIO, Ceph RGW, R2, moto…): each
/// archive object is one S3 object `prefix + name`. PUT is atomic (a reader sees the whole
/// object or none), so no temporary names are needed; a base larger than a part is uploaded
/// by multipart upload (aborted on failure). Requests are signed with SigV4 (`x-amz-content-
/// sha256` carries the body's hash, so the store checks what it received).
///
/// The calls block: the archiver calls them from its own thread and `ember` from its commands.
/// The HTTP client's futures complete on its own event loops, so waiting never needs Swift's
/// cooperative pool.
public struct S3ArchiveStore: ArchiveStore {
    public let bucket: S3Location
    public let settings: S3Settings
    let signer: SigV4
    let now: @Sendable () -> Int64

    /// Attempts of one request when the store answers 500/502/503/504 or the connection fails
    /// (every request the archive makes is idempotent), with this pause before the n-th retry × n.
    public static let maxAttempts = 3
    static let retryPauseSeconds = 0.5
    /// How long one request may take (a part of `partBytes` at a slow link included).
    public static let requestTimeoutSeconds: Int64 = 300
    /// Largest object read into memory (`get`: a segment; the archiver closes them at 1 GiB at most).
    public static let maxGetBytes = 2 << 30
    /// Largest answer read for a listing, an error or an upload's completion.
    static let maxXMLBytes = 16 << 20
    /// Listing pages followed at most (1,000 keys each).
    static let maxListPages = 100_000

    public init(location: S3Location, settings: S3Settings,
                now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }) {
        bucket = location
        self.settings = settings
        signer = SigV4(credentials: settings.credentials, region: settings.region)
        self.now = now
    }

    public var location: String { bucket.description }

    // MARK: - ArchiveStore

    public func put(_ name: String, bytes: [UInt8]) throws {
        let key = try objectKey(name)
        _ = try send("PUT", key: key, body: bytes, expect: [200], what: "store \(name)")
    }

    public func putFile(_ name: String, from path: String) throws {
        let key = try objectKey(name)
        guard let h = FileHandle(forReadingAtPath: path) else { throw ArchiveError("cannot read \(path)") }
        defer { try? h.close() }
        let size: Int
        do { size = Int(try h.seekToEnd()); try h.seek(toOffset: 0) } catch { throw ArchiveError("cannot read \(path): \(error)") }
        // At most `maxParts` parts: a larger file takes larger parts.
        let part = max(settings.partBytes, (size + S3Settings.maxParts - 1) / S3Settings.maxParts)
        guard size > part else {
            let bytes: [UInt8]
            do { bytes = Array(try h.readToEnd() ?? Data()) } catch { throw ArchiveError("cannot read \(path): \(error)") }
            return try put(name, bytes: bytes)
        }
        let started = try send("POST", key: key, query: [("uploads", "")], expect: [200], what: "start uploading \(name)")
        guard let uploadID = S3XML.value("UploadId", in: started.text), !uploadID.isEmpty else {
            throw ArchiveError("s3 \(location): starting the upload of \(name) returned no UploadId")
        }
        do {
            var etags: [String] = []
            while true {
                let chunk: Data
                do { chunk = try h.read(upToCount: part) ?? Data() } catch { throw ArchiveError("cannot read \(path): \(error)") }
                if chunk.isEmpty { break }
                let number = etags.count + 1
                let r = try send("PUT", key: key, query: [("partNumber", String(number)), ("uploadId", uploadID)], body: Array(chunk),
                                 expect: [200], what: "upload part \(number) of \(name)")
                guard let etag = r.headers.first(name: "etag") else { throw ArchiveError("s3 \(location): part \(number) of \(name) has no ETag") }
                etags.append(etag)
            }
            let xml = "<CompleteMultipartUpload>" + etags.enumerated().map {
                "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\(S3XML.escape($0.element))</ETag></Part>"
            }.joined() + "</CompleteMultipartUpload>"
            let done = try send("POST", key: key, query: [("uploadId", uploadID)], body: Array(xml.utf8), expect: [200],
                                what: "complete the upload of \(name)")
            // S3 may answer 200 and report the failure in the body.
            if let code = S3XML.value("Code", in: done.text), done.text.contains("<Error>") {
                throw ArchiveError("s3 \(location): completing the upload of \(name): \(code) \(S3XML.value("Message", in: done.text) ?? "")")
            }
        } catch {
            // Parts of an unfinished upload are stored (and billed) until it is aborted.
            _ = try? send("DELETE", key: key, query: [("uploadId", uploadID)], expect: [204, 200, 404], what: "abort the upload of \(name)")
            throw error
        }
    }

    public func list() throws -> [String] {
        var names: [String] = []
        var token: String? = nil
        for _ in 0..<Self.maxListPages {
            // The delimiter keeps keys under a deeper prefix out (another archive nested in this one).
            var query = [("list-type", "2"), ("prefix", bucket.prefix), ("delimiter", "/")]
            if let token { query.append(("continuation-token", token)) }
            let r = try send("GET", key: nil, query: query, expect: [200], what: "list")
            for key in S3XML.values("Key", in: r.text) where key.hasPrefix(bucket.prefix) {
                names.append(String(key.dropFirst(bucket.prefix.count)))
            }
            guard S3XML.value("IsTruncated", in: r.text) == "true" else { return names }
            guard let next = S3XML.value("NextContinuationToken", in: r.text), !next.isEmpty, next != token else {
                throw ArchiveError("s3 \(location): a truncated listing without a new continuation token")
            }
            token = next
        }
        throw ArchiveError("s3 \(location): more than \(Self.maxListPages) listing pages")
    }

    public func get(_ name: String) throws -> [UInt8] {
        try send("GET", key: try objectKey(name), expect: [200], what: "read \(name)", maxBytes: Self.maxGetBytes).body
    }

    public func getFile(_ name: String, to path: String) throws {
        let key = try objectKey(name)
        try? FileManager.default.removeItem(atPath: path)
        try withRetries("read \(name)") {
            let request = try self.request("GET", key: key, query: [], body: [])
            let delegate: FileDownloadDelegate
            do { delegate = try FileDownloadDelegate(path: path, pool: nil) } catch { throw ArchiveError("cannot write \(path): \(error)") }
            let progress = try Self.client.execute(request: request, delegate: delegate, deadline: self.deadline()).futureResult.wait()
            guard progress.head.status == .ok else {
                // The file holds the error's XML.
                let text = String(decoding: (FileManager.default.contents(atPath: path) ?? Data()).prefix(Self.maxXMLBytes), as: UTF8.self)
                try? FileManager.default.removeItem(atPath: path)
                return Response(status: progress.head.status, headers: progress.head.headers, body: Array(text.utf8))
            }
            return nil
        }
    }

    public func delete(_ name: String) throws {
        _ = try send("DELETE", key: try objectKey(name), expect: [204, 200], what: "delete \(name)")
    }

    // MARK: - Requests

    /// The object key of an archive name (the catalog's names: no `/`, no leading `.`).
    func objectKey(_ name: String) throws(ArchiveError) -> String {
        guard !name.isEmpty, !name.contains("/"), !name.hasPrefix("."), name.count <= 200 else {
            throw ArchiveError("bad archive object name \(name)")
        }
        return bucket.prefix + name
    }

    /// The encoded request path and the host (with a port other than the scheme's).
    func target(key: String?) -> (path: String, host: String, base: String) {
        let url = URL(string: settings.endpoint)!
        let scheme = url.scheme ?? "https"
        var host = url.host ?? ""
        if let port = url.port, !(scheme == "http" && port == 80), !(scheme == "https" && port == 443) { host += ":\(port)" }
        let keyPath = key.map { SigV4.uriEncode($0, keepSlash: true) } ?? ""
        switch settings.addressing {
        case .path:
            return ("/" + bucket.bucket + (key == nil ? "" : "/" + keyPath), host, scheme + "://" + host)
        case .virtual:
            let h = bucket.bucket + "." + host
            return ("/" + keyPath, h, scheme + "://" + h)
        }
    }

    func request(_ method: String, key: String?, query: [(String, String)], body: [UInt8]) throws -> HTTPClient.Request {
        let (path, host, base) = target(key: key)
        let date = SigV4.amzDate(now())
        let payloadHash = SigV4.sha256Hex(body)
        var headers = [("host", host), ("x-amz-date", date), ("x-amz-content-sha256", payloadHash)]
        if let token = settings.credentials.sessionToken { headers.append(("x-amz-security-token", token)) }
        let signed = signer.sign(method: method, path: path, query: query, headers: headers, payloadHash: payloadHash, amzDate: date)
        let q = SigV4.canonicalQuery(query)
        var h = HTTPHeaders(headers)
        h.add(name: "authorization", value: signed.authorization)
        do {
            return try HTTPClient.Request(url: base + path + (q.isEmpty ? "" : "?" + q), method: HTTPMethod(rawValue: method), headers: h,
                                          body: body.isEmpty && (method == "GET" || method == "DELETE") ? nil : .bytes(body))
        } catch {
            throw ArchiveError("s3 \(location): cannot make a request to \(base): \(error)")
        }
    }

    struct Response: Sendable {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var body: [UInt8]
        var text: String { String(decoding: body.prefix(S3ArchiveStore.maxXMLBytes), as: UTF8.self) }
    }

    /// Sends a signed request (again on a retryable failure); an answer outside `expect` is an error.
    func send(_ method: String, key: String?, query: [(String, String)] = [], body: [UInt8] = [], expect: Set<UInt>,
              what: String, maxBytes: Int = S3ArchiveStore.maxXMLBytes) throws -> Response {
        var ok: Response? = nil
        try withRetries(what) {
            let r = try Self.client.execute(request: try self.request(method, key: key, query: query, body: body),
                                            delegate: BoundedBody(limit: maxBytes), deadline: self.deadline()).futureResult.wait()
            if expect.contains(r.status.code) { ok = r; return nil }
            return r
        }
        return ok!
    }

    /// Runs `attempt` (nil: done; a response: the store refused) up to `maxAttempts` times.
    func withRetries(_ what: String, _ attempt: () throws -> Response?) throws {
        var last = ""
        for n in 1...Self.maxAttempts {
            if n > 1 { Thread.sleep(forTimeInterval: Self.retryPauseSeconds * Double(n - 1)) }
            do {
                guard let refused = try attempt() else { return }
                let text = refused.text
                let detail = [S3XML.value("Code", in: text), S3XML.value("Message", in: text)].compactMap { $0 }.joined(separator: ": ")
                last = "\(refused.status.code)\(detail.isEmpty ? "" : " " + detail)"
                guard [500, 502, 503, 504].contains(refused.status.code) else { break }
            } catch let e as ArchiveError {
                throw ArchiveError("s3 \(location): cannot \(what): \(e)")
            } catch {
                last = "\(error)"
            }
        }
        throw ArchiveError("s3 \(location): cannot \(what): \(last)")
    }

    func deadline() -> NIODeadline { .now() + .seconds(Self.requestTimeoutSeconds) }

    /// One client for the process's archive requests: no redirects (a signed request is not
    /// replayed elsewhere), bounded connect and read times.
    static let client: HTTPClient = {
        var c = HTTPClient.Configuration()
        c.redirectConfiguration = .disallow
        c.timeout = .init(connect: .seconds(10), read: .seconds(120))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: c)
    }()
}

/// Collects a response's body up to `limit` bytes (a larger one fails the request).
/// Callbacks come in order on the request's event loop, which is what guards `state`.
final class BoundedBody: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = S3ArchiveStore.Response
    let limit: Int
    var state = S3ArchiveStore.Response(status: .ok, headers: [:], body: [])

    init(limit: Int) { self.limit = limit }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        state.status = head.status
        state.headers = head.headers
        if let n = head.headers.first(name: "content-length").flatMap(Int.init), n > limit {
            return task.eventLoop.makeFailedFuture(ArchiveError("an answer of \(n) bytes is over the \(limit) bytes read"))
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard state.body.count + buffer.readableBytes <= limit else {
            return task.eventLoop.makeFailedFuture(ArchiveError("an answer over the \(limit) bytes read"))
        }
        state.body += buffer.readableBytesView
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response { state }
}
