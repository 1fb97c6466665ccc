import EmberCore
import HTTPTypes
import Hummingbird
import NIOCore

/// The rules endpoint (who a request acts as is the `ClientPolicy`'s decision).
extension RestHandler {
    /// Firebase's limit on a rules document.
    static let maxRulesBytes = 256 * 1024

    /// `GET`/`PUT /.settings/rules.json` (admin only). A PUT goes through the log like data, so
    /// every replica switches rules at the same point; bad rules are refused with their line.
    func rulesEndpoint(_ req: RestRequest, method: HTTPRequest.Method, request: Request, identity: Identity) async throws -> Response {
        guard identity.isAdmin else { throw PermissionDenied() }
        let ns = req.namespace!
        switch method {
        case .get:
            return RestAnswer.jsonText(gate.text(ns)).response
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
