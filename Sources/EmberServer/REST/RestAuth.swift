import EmberCore
import HTTPTypes
import Hummingbird
import NIOCore

/// Who a REST request (or SSE stream) acts as, and the rules endpoint.
extension RestHandler {
    /// Firebase's limit on a rules document.
    static let maxRulesBytes = 256 * 1024

    /// `auth=` / `access_token=` or `Authorization: Bearer`, through the node's verifier; no
    /// credential is anonymous. An admin client certificate (`base`) outranks any token (the CLI
    /// sends `Bearer owner` by default), so its requests are admin whatever they carry. An admin's `auth_variable_override` replaces the identity (null:
    /// anonymous); others' is ignored, so it can never raise privileges.
    func resolveIdentity(_ req: RestRequest, headers: HTTPFields, channel: (any Channel)?, base: Identity = .anonymous) throws -> Identity {
        let token = ClientCredentials.token(query: req.authToken, headers: headers)
        var identity = base
        if token != nil && !base.isAdmin {
            do { identity = try config.identity(token: token, address: ClientCredentials.address(of: channel), now: clock()) } catch {
                throw error.restError
            }
        }
        if identity.isAdmin, let override = req.authOverride {
            identity = override.map { .user(claims: $0, expiresAt: nil) } ?? .anonymous
        }
        return identity
    }

    /// `GET`/`PUT /.settings/rules.json` (admin only). A PUT goes through the log like data, so
    /// every replica switches rules at the same point; bad rules are refused with their line.
    func rulesEndpoint(_ req: RestRequest, method: HTTPRequest.Method, request: Request, identity: Identity) async throws -> Response {
        guard identity.isAdmin else { throw PermissionDenied() }
        let ns = req.namespace!
        switch method {
        case .get:
            var headers = HTTPFields()
            headers[.contentType] = "application/json; charset=utf-8"
            headers[.cacheControl] = "no-cache"
            headers[.accessControlAllowOrigin] = "*"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: gate.text(ns))))
        case .put:
            var body = request.body
            let data = try await Self.collect(&body, contentLength: request.headers[.contentLength], limit: Self.maxRulesBytes)
            guard let text = String(validating: data.readableBytesView, as: UTF8.self) else {
                throw RestError.badRequest("Rules must be UTF-8 text")
            }
            _ = try RulesDocument(text: text)  // 400 with the line and reason; nothing is logged
            try await store.rules.setRules(namespace: ns, text: text)
            return Self.json(.object(["status": .string("ok")]), pretty: false)
        default:
            throw RestError(405, "Rules support GET and PUT")
        }
    }
}
