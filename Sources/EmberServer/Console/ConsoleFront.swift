import EmberCore
import HTTPTypes
import Hummingbird
import NIOCore

/// The web console (`/.ember/console/`): static assets compiled into the binary (no CDN, no
/// network at the user's site, nothing to build at install). The page talks to this node's own
/// REST, SSE, status, metrics, rules and cluster endpoints with the token the user signs in with,
/// so it shows exactly what that identity may see.
enum ConsoleFront {
    static let prefix = "/.ember/console"

    struct Asset: Sendable {
        let contentType: String
        let bytes: [UInt8]
        let etag: String

        init(_ contentType: String, _ text: String) {
            self.contentType = contentType
            bytes = Array(text.utf8)
            etag = "\"" + SHA1.hexDigest(bytes) + "\""
        }
    }

    static let assets: [String: Asset] = [
        "index.html": Asset("text/html; charset=utf-8", ConsoleAssets.indexHTML),
        "console.css": Asset("text/css; charset=utf-8", ConsoleAssets.css),
        "api.js": Asset("text/javascript; charset=utf-8", ConsoleAssets.apiJS),
        "data.js": Asset("text/javascript; charset=utf-8", ConsoleAssets.dataJS),
        "query.js": Asset("text/javascript; charset=utf-8", ConsoleAssets.queryJS),
        "rules.js": Asset("text/javascript; charset=utf-8", ConsoleAssets.rulesJS),
        "cluster.js": Asset("text/javascript; charset=utf-8", ConsoleAssets.clusterJS),
        "triggers.js": Asset("text/javascript; charset=utf-8", ConsoleAssets.triggersJS),
        "main.js": Asset("text/javascript; charset=utf-8", ConsoleAssets.mainJS),
    ]

    static func handles(_ path: String) -> Bool {
        path == prefix || path.hasPrefix(prefix + "/")
    }

    /// `memberOrigins`: other nodes' client URLs, which the cluster dashboard polls directly
    /// (their `/.ember/status` answers any origin); the page may connect nowhere else.
    static func respond(to request: Request, enabled: Bool, memberOrigins: [String] = []) throws -> Response {
        guard enabled else { throw RestError(404, "The console is turned off on this node (--no-console)") }
        guard request.method == .get || request.method == .head else {
            throw RestError(405, "The console serves GET only")
        }
        let path = request.uri.path
        if path == prefix {
            var headers = HTTPFields()
            headers[.location] = prefix + "/"
            return Response(status: .permanentRedirect, headers: headers)
        }
        var name = String(path.dropFirst(prefix.count + 1))
        if name.isEmpty { name = "index.html" }
        guard let asset = assets[name] else { throw RestError(404, "No console asset \(name)") }
        var headers = securityHeaders(memberOrigins: memberOrigins)
        headers[.contentType] = asset.contentType
        headers[.eTag] = asset.etag
        headers[.cacheControl] = "no-cache"
        if request.headers[.ifNoneMatch] == asset.etag {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentLength] = "\(asset.bytes.count)"
        let body: ResponseBody = request.method == .head ? .init() : .init(byteBuffer: ByteBuffer(bytes: asset.bytes))
        return Response(status: .ok, headers: headers, body: body)
    }

    /// No inline script or style, no framing, no referrer; connections only to this node and
    /// the cluster's other client URLs.
    static func securityHeaders(memberOrigins: [String]) -> HTTPFields {
        var headers = HTTPFields()
        let connect = (["'self'"] + memberOrigins).joined(separator: " ")
        headers[HTTPField.Name("Content-Security-Policy")!] =
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src \(connect); "
            + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return headers
    }

    /// Origins (scheme://host:port) of client URLs; malformed ones are left out.
    static func origins(of urls: [String]) -> [String] {
        Set(urls.compactMap { url -> String? in
            guard let scheme = url.range(of: "://") else { return nil }
            let rest = url[scheme.upperBound...]
            let host = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || ".-:[]".contains($0) }) else { return nil }
            return String(url[..<scheme.upperBound]) + host
        }).sorted()
    }
}
