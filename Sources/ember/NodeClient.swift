import ArgumentParser
import AsyncHTTPClient
import EmberCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

/// How to reach and authenticate to nodes; shared by every command that talks to one.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .customLong("node"), help: "Node client URL (repeatable for status; default $EMBER_NODE or http://127.0.0.1:9000).")
    var nodes: [String] = []

    @Option(help: "Bearer token (default $EMBER_TOKEN, else `owner`: the admin token of a node in protected mode).")
    var token: String?

    @Option(help: "File holding the bearer token.")
    var tokenFile: String?

    @Option(help: "CA certificate (PEM) to verify HTTPS nodes.")
    var cacert: String?

    @Option(help: "Client certificate (PEM) for HTTPS nodes that ask for one.")
    var cert: String?

    @Option(help: "Private key (PEM) of --cert.")
    var key: String?

    @Option(help: "Namespace (the ns= parameter); default: the node's default.")
    var ns: String?

    @Option(help: "Seconds to wait for a node's answer.")
    var timeout: Double = 30

    var node: String {
        let n = nodes.first ?? ProcessInfo.processInfo.environment["EMBER_NODE"] ?? "http://127.0.0.1:9000"
        return n.hasSuffix("/") ? String(n.dropLast()) : n
    }

    /// The most of a token file read (admin tokens and JWTs are far smaller).
    static let maxTokenFileBytes = 64 * 1024

    func resolvedToken() throws -> String {
        if let token { return token }
        if let tokenFile {
            // Read to the end rather than by the file's size: a pipe (`--token-file <(docker-compose
            // exec -T n1 cat /certs/admin.token)`) has none. A token is small: a bounded read.
            guard let h = FileHandle(forReadingAtPath: tokenFile),
                  let d = try? h.read(upToCount: Self.maxTokenFileBytes) else {
                throw CLIError("cannot read token file \(tokenFile)")
            }
            try? h.close()
            let token = String(decoding: d, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !token.isEmpty else { throw CLIError("token file \(tokenFile) is empty") }
            return token
        }
        return ProcessInfo.processInfo.environment["EMBER_TOKEN"] ?? "owner"
    }

    func validate() throws {
        guard (cert == nil) == (key == nil) else { throw ValidationError("--cert and --key go together") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }
}

/// A node's answer.
struct NodeResponse {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    func json() throws -> JSON {
        do { return try JSON.parse(body) } catch { throw CLIError("node answered invalid JSON") }
    }
}

/// HTTP(S) to nodes with the bearer token on every request. Errors (connection refused, HTTP
/// 4xx/5xx with Firebase's `{"error": ...}`) become one-line `CLIError`s.
/// `@unchecked Sendable`: every property is set once in `init` (HTTPClient is thread-safe), so
/// concurrent requests (`ember import --in-flight`) share one client.
final class NodeClient: @unchecked Sendable {
    /// Largest answer read into memory (exports and backups stream to files instead).
    static let maxResponseBytes = 512 << 20

    let http: HTTPClient
    let options: ConnectionOptions
    let token: String

    init(_ options: ConnectionOptions, streaming: Bool = false) throws {
        self.options = options
        self.token = try options.resolvedToken()
        var config = HTTPClient.Configuration()
        config.timeout = .init(connect: .seconds(5), read: streaming ? nil : .milliseconds(Int64(options.timeout * 1000)))
        if options.cacert != nil || options.cert != nil {
            var tls = TLSConfiguration.makeClientConfiguration()
            if let ca = options.cacert {
                do { tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(ca)) } catch {
                    throw CLIError("cannot read --cacert \(ca): \(error)")
                }
            }
            if let cert = options.cert, let key = options.key {
                do {
                    tls.certificateChain = try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) }
                    tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
                } catch {
                    throw CLIError("cannot read --cert/--key: \(error)")
                }
            }
            config.tlsConfiguration = tls
        }
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: config)
    }

    func shutdown() async { try? await http.shutdown() }

    /// Runs `body` with a client and always shuts it down.
    static func with<T>(_ options: ConnectionOptions, streaming: Bool = false,
                        _ body: (NodeClient) async throws -> T) async throws -> T {
        let client = try NodeClient(options, streaming: streaming)
        do {
            let r = try await body(client)
            await client.shutdown()
            return r
        } catch {
            await client.shutdown()
            throw error
        }
    }

    func makeRequest(_ method: HTTPMethod, _ url: String, body: [UInt8]? = nil) -> HTTPClientRequest {
        var r = HTTPClientRequest(url: url)
        r.method = method
        r.headers.add(name: "Authorization", value: "Bearer \(token)")
        if let body {
            r.headers.add(name: "Content-Type", value: "application/json")
            r.body = .bytes(ByteBuffer(bytes: body))
        }
        return r
    }

    /// Opens an SSE stream (`GET url` asking for `text/event-stream`); a non-200 answer throws
    /// with the node's error message.
    func openEventStream(_ url: String) async throws -> HTTPClientResponse {
        var request = makeRequest(.GET, url)
        request.headers.add(name: "Accept", value: "text/event-stream")
        let response = try await send(request)
        guard response.status.code == 200 else {
            let body = Array(buffer: try await response.body.collect(upTo: 1 << 20))
            throw Self.failure(.GET, request.url, Int(response.status.code), body)
        }
        return response
    }

    /// Sends a request; the response head within --timeout.
    func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        do {
            return try await http.execute(request, timeout: .milliseconds(Int64(options.timeout * 1000)))
        } catch {
            throw CLIError("\(request.method) \(request.url): \(Self.describe(error))")
        }
    }

    /// A whole request/response; non-2xx answers throw with the node's error message.
    @discardableResult
    func call(_ method: HTTPMethod, _ url: String, body: [UInt8]? = nil, allowError: Bool = false) async throws -> NodeResponse {
        let request = makeRequest(method, url, body: body)
        let response = try await send(request)
        let bytes: ByteBuffer
        do { bytes = try await response.body.collect(upTo: Self.maxResponseBytes) } catch {
            throw CLIError("\(method) \(url): \(Self.describe(error))")
        }
        let r = NodeResponse(status: Int(response.status.code), headers: response.headers, body: Array(buffer: bytes))
        if !allowError && !(200..<300).contains(r.status) { throw Self.failure(method, url, r.status, r.body) }
        return r
    }

    static func failure(_ method: HTTPMethod, _ url: String, _ status: Int, _ body: [UInt8]) -> CLIError {
        var message = String(decoding: body.prefix(500), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if case .object(let o)? = try? JSON.parse(body), case .string(let e)? = o["error"] { message = e }
        return CLIError("\(method) \(url): HTTP \(status)\(message.isEmpty ? "" : ": \(message)")")
    }

    static func describe(_ error: Error) -> String {
        let text = "\(error)"
        if text.contains("connectionRefused") || text.contains("Connection refused") { return "connection refused" }
        if text.contains("deadlineExceeded") || text.contains("readTimeout") { return "timed out" }
        if text.contains("connectTimeout") { return "connect timed out" }
        return text
    }

    /// `<node>/<path>.json?ns=...&extra`, each path segment percent-encoded.
    func dataURL(_ path: String, node: String? = nil, query: [String] = []) -> String {
        let segments = path.split(separator: "/").map {
            String($0).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#"))) ?? String($0)
        }
        var q = query
        if let ns = options.ns { q.insert("ns=\(ns)", at: 0) }
        return (node ?? options.node) + "/" + segments.joined(separator: "/") + ".json" + (q.isEmpty ? "" : "?" + q.joined(separator: "&"))
    }
}
