import EmberCore
import HTTPTypes
import Hummingbird
import NIOCore

/// Triggers over REST (issue 36), admin only:
///
///   GET|PUT /.settings/triggers.json            the namespace's definitions (400 with the reason)
///   GET     /.ember/triggers                    each trigger's state and this node's deliveries
///   GET     /.ember/triggers/NAME/dead          its dead letters (CloudEvents)
///   POST    /.ember/triggers/NAME/pause|resume
///   POST    /.ember/triggers/NAME/replay        {"from": index}: dead letters back in the outbox
///
/// `?ns=` names the namespace (default: the node's).
extension RestHandler {
    static let maxTriggerAdminBodyBytes = 4_096
    /// Named limit: dead letters one answer lists.
    static let maxListedDeadLetters = 100

    func triggersPort() throws -> any TriggersPort {
        guard let port = store.triggers else { throw RestError(404, "This node has no triggers") }
        return port
    }

    func triggersEndpoint(_ req: RestRequest, method: HTTPRequest.Method, request: Request, identity: Identity) async throws -> Response {
        guard identity.isAdmin else { throw PermissionDenied() }
        let ns = req.namespace!
        let port = try triggersPort()
        switch method {
        case .get:
            return Self.json(try port.definitions(namespace: ns).json, pretty: req.print == .pretty)
        case .put:
            var body = request.body
            let data = try await Self.collect(&body, contentLength: request.headers[.contentLength], limit: TriggerSet.maxDocumentBytes)
            guard let text = String(validating: data.readableBytesView, as: UTF8.self) else {
                throw RestError.badRequest("Triggers must be UTF-8 JSON")
            }
            let set: TriggerSet
            do { set = try TriggerSet(text: text) } catch { throw RestError.badRequest("Triggers refused: \(error.reason)") }
            try await port.log(namespace: ns, .define(text: set.text))
            return Self.json(.object(["status": .string("ok"), "triggers": .int(Int64(set.definitions.count))]), pretty: false)
        default:
            throw RestError(405, "Triggers support GET and PUT")
        }
    }

    static func isTriggerAdmin(_ name: String) -> Bool { name == "triggers" || name.hasPrefix("triggers/") }

    func triggerAdmin(_ name: String, method: HTTPRequest.Method, request: Request, req: RestRequest,
                      channel: (any Channel)?, base: Identity) async throws -> Response {
        try authorizeAdmin(request: request, req: req, channel: channel, base: base)
        let port = try triggersPort()
        let ns = req.namespace ?? config.defaultNamespace
        let parts = name.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if parts == ["triggers"] {
            guard method == .get else { throw RestError(405, "Use GET on /.ember/triggers") }
            return Self.json(.object(["namespace": .string(ns), "triggers": try triggersJSON(port, ns, shallow: req.shallow)]),
                             pretty: req.print == .pretty)
        }
        guard parts.count == 3 else { throw RestError(404, "Unknown trigger endpoint /.ember/\(name)") }
        let trigger = parts[1]
        guard try port.definitions(namespace: ns).definition(named: trigger) != nil else {
            throw RestError(404, "No trigger \(trigger.prefix(80)) in namespace \(ns)")
        }
        switch (parts[2], method) {
        case ("dead", .get):
            let dead = try port.deadLetters(namespace: ns, trigger: trigger, limit: Self.maxListedDeadLetters)
            return Self.json(.object(["deadLetters": .array(dead.map { d in
                .object(["index": .int(Int64(d.index)), "reason": .string(d.reason),
                         "events": .array(d.events.map { $0.cloudEvent(namespace: ns, trigger: trigger) })])
            })]), pretty: req.print == .pretty)
        case ("pause", .post):
            try await port.log(namespace: ns, .pause(name: trigger))
        case ("resume", .post):
            try await port.log(namespace: ns, .resume(name: trigger))
        case ("replay", .post):
            var body = request.body
            let data = try await Self.collect(&body, contentLength: request.headers[.contentLength], limit: Self.maxTriggerAdminBodyBytes)
            var from: UInt64 = 0
            if data.readableBytes > 0 {
                guard let json = try? JSON.parse(data.readableBytesView), case .object(let o) = json else {
                    throw RestError.badRequest("The body must be a JSON object, {\"from\": index}")
                }
                switch o["from"] {
                case nil, .null?: break
                case .int(let i)? where i >= 0: from = UInt64(i)
                default: throw RestError.badRequest("\"from\" must be a log index (a non-negative integer)")
                }
            }
            try await port.log(namespace: ns, .replay(name: trigger, from: from))
        default:
            throw RestError(405, "Method \(method) is not supported on /.ember/\(name)")
        }
        return Self.json(.object(["status": .string("ok")]), pretty: false)
    }

    /// Each trigger: its definition (secret withheld), replicated state and this node's
    /// deliveries; `shallow`: the state alone (what a monitor polling the lag needs, without
    /// the definitions and recent deliveries rendered on every poll).
    func triggersJSON(_ port: any TriggersPort, _ ns: String, shallow: Bool = false) throws -> JSON {
        var out: KeyMap<JSON> = [:]
        for t in try port.triggers(namespace: ns) {
            if shallow {
                out[t.definition.name] = .object(["state": t.state.json])
                continue
            }
            var def = t.definition.json
            if case .object(var o) = def { o["secret"] = .string("(withheld)"); def = .object(o) }
            out[t.definition.name] = .object(["definition": def, "state": t.state.json,
                                              "node": triggerRuntime.json(ns, t.definition.name)])
        }
        return .object(out)
    }

    /// `/.ember/status`'s `triggers`: per namespace, each trigger's state (nil: no triggers).
    func triggerStatus() -> JSON? {
        guard let port = store.triggers, let namespaces = try? port.namespaces(), !namespaces.isEmpty else { return nil }
        var out: KeyMap<JSON> = [:]
        for ns in namespaces {
            guard let ts = try? port.triggers(namespace: ns) else { continue }
            out[ns] = .object(KeyMap(uniqueKeysWithValues: ts.map { t in
                guard case .object(var s) = t.state.json else { return (t.definition.name, JSON.null) }
                if case .object(let node) = triggerRuntime.json(ns, t.definition.name) {
                    s["delivering"] = node["delivering"] ?? .bool(false)
                    s["lastError"] = node["lastError"] ?? .null
                }
                return (t.definition.name, .object(s))
            }))
        }
        return .object(out)
    }

    func triggerMetricsText() -> String {
        var lag: [(ns: String, name: String, entries: UInt64, behind: Bool)] = []
        if let port = store.triggers, let namespaces = try? port.namespaces() {
            for ns in namespaces {
                for t in (try? port.triggers(namespace: ns)) ?? [] {
                    lag.append((ns, t.definition.name, t.state.pending, t.state.behind))
                }
            }
        }
        return triggerRuntime.metricsText(lag: lag)
    }
}
