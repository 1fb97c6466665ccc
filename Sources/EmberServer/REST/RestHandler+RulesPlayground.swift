import EmberCore
import EmberRules
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `POST /.ember/rules/simulate` (admin): the Rules Playground. Evaluates one read, set or update
/// against the namespace's rules in force (or rules given in the request) and its current data,
/// and answers the verdict with the rule that decided it. Nothing is written or logged.
///
///     {"type": "read" | "set" | "update", "path": "/users/alice", "data": <JSON, for set/update>,
///      "auth": <the auth variable: {"uid": ...} or null>, "rules": "<rules text>" (optional),
///      "now": <ms> (optional)}
///     → {"allowed": true, "reason": "...", "decidedBy": {kind, path, location, rule, result} | null,
///        "steps": [...]}
extension RestHandler {
    /// A rules document (256 KiB) plus the data and auth of the simulated request.
    static let maxPlaygroundBodyBytes = maxRulesBytes + 1024 * 1024
    /// Steps answered (a long cascade of rules is cut here; `truncated` says so).
    static let maxPlaygroundSteps = 500

    func rulesPlayground(method: HTTPRequest.Method, request: Request, req: RestRequest, channel: (any Channel)?,
                         base: Identity) async throws -> Response {
        try authorizeAdmin(request: request, req: req, channel: channel, base: base)
        guard method == .post else { throw RestError(405, "The rules playground takes POST") }
        var body = request.body
        let bytes = try await Self.collect(&body, contentLength: request.headers[.contentLength], limit: Self.maxPlaygroundBodyBytes)
        let parsed: JSON
        do { parsed = try JSON.parse(bytes.readableBytesView) } catch {
            throw RestError.badRequest("The body must be JSON: \(error.description)")
        }
        guard case .object(let o) = parsed else { throw RestError.badRequest("The body must be a JSON object") }
        guard case .string(let type)? = o["type"], ["read", "set", "update"].contains(type) else {
            throw RestError.badRequest("\"type\" must be \"read\", \"set\" or \"update\"")
        }
        guard case .string(let pathText)? = o["path"] else { throw RestError.badRequest("\"path\" must be a string") }
        let path = try Path(pathText)
        let auth: JSON?
        switch o["auth"] {
        case nil, .null?: auth = nil
        case .object?: auth = o["auth"]
        default: throw RestError.badRequest("\"auth\" must be an object (the auth variable) or null")
        }
        let ns = req.namespace ?? config.defaultNamespace
        let engine: RulesEngine
        switch o["rules"] {
        case nil, .null?: engine = gate.engine(ns)
        case .string(let text)?: engine = try RulesDocument(text: text).engine
        default: throw RestError.badRequest("\"rules\" must be the rules text (a string)")
        }
        let now: Int64
        switch o["now"] {
        case nil, .null?: now = clock()
        case .int(let n)?: now = n
        default: throw RestError.badRequest("\"now\" must be an integer (milliseconds since 1970)")
        }
        let value = o["data"] ?? .null
        if type != "read" { try validation.validate(value, at: path) }
        var updateParts: [(Path, JSON)] = []
        if type == "update" {
            guard case .object(let parts) = value else { throw RestError.badRequest("An update's \"data\" must be an object") }
            updateParts = try validation.updateParts(base: path, parts)
        }
        let decision: RulesDecision = try store.reader.withRulesData(namespace: ns) { data in
            func node(_ j: JSON, at p: Path) throws -> Node {
                let resolved = ServerValues.containsPlaceholder(j) ? try ServerValues.resolve(j, existing: data.node(at: p), now: now) : j
                return try Node(json: resolved, depth: p.count)
            }
            switch type {
            case "read":
                return engine.explainRead(path: path, auth: auth, data: data, now: now)
            case "set":
                return engine.explainWrite(path: path, newValue: try node(value, at: path), auth: auth, data: data, now: now)
            default:
                let nodes = try updateParts.map { ($0.0, try node($0.1, at: path.appending($0.0))) }
                return engine.explainUpdate(path: path, parts: nodes, auth: auth, data: data, now: now)
            }
        }
        func step(_ s: RulesTraceStep) -> JSON {
            .object(["kind": .string(s.kind), "path": .string(s.path.description), "location": .string(s.location),
                     "rule": .string(s.rule), "result": .bool(s.result)])
        }
        let answer: JSON = .object([
            "allowed": .bool(decision.allowed), "reason": .string(decision.reason),
            "decidedBy": decision.decidedBy.map(step) ?? .null,
            "steps": .array(decision.steps.prefix(Self.maxPlaygroundSteps).map(step)),
            "truncated": .bool(decision.steps.count > Self.maxPlaygroundSteps),
        ])
        return Self.json(answer, pretty: false)
    }
}
