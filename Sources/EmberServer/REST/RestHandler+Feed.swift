import EmberCore
import EmberProtocol
import HTTPTypes
import Hummingbird
import NIOCore

/// The pull feed (issue 36): `GET /.ember/feed?ns=NS&path=/pattern&from=CURSOR` streams
/// the events of the feed defined for that pattern in `/.settings/triggers.json` (`"feed": true`)
/// as server-sent events, one per log entry: `id:` the entry's log index (the cursor), `data:` a
/// JSON array of its CloudEvents. `from` (or `Last-Event-ID`) resumes after that cursor; one
/// older than the feed keeps answers 410 with the oldest cursor it can resume from.
///
/// Who may read it: an admin, every event; a caller with an auth token, only the events at
/// locations the namespace's rules let that identity read (each event's concrete path is
/// checked as a REST read of it would be, when the event is sent: the rules in force and the
/// data as they are then); an entry with none of those is not sent. No token: 401.
extension RestHandler {
    static let feedPath = "/.ember/feed"
    /// Named limits: rows read per poll, and how often an idle feed looks for new entries.
    static let feedRowsPerRead = 256
    static let feedPoll = Duration.milliseconds(100)

    func feedEndpoint(_ request: Request, channel: (any Channel)?, base: Identity) async throws -> Response {
        guard request.method == .get else { throw RestError(405, "Use GET on \(Self.feedPath)") }
        let uri = request.uri.string
        let query = uri.firstIndex(of: "?").map { uri[uri.index(after: $0)...] } ?? ""
        guard query.utf8.count <= RestRequest.maxQueryBytes, let items = PercentDecoding.queryItems(query) else {
            throw RestError.badRequest("Invalid query string")
        }
        var req = RestRequest(target: .node("feed"))
        var path: String?, from: UInt64?
        for (k, v) in items {
            switch k {
            case "path": path = v
            case "from":
                guard let n = UInt64(v) else { throw RestError.badRequest("\"from\" must be a cursor (a log index)") }
                from = n
            case "ns":
                guard Key.isValid(v), v.utf8.count <= 128 else { throw RestError.badRequest("Invalid namespace") }
                req.namespace = v
            case "auth", "access_token": req.authToken = v
            default: throw RestError.badRequest("Unknown parameter \(k.prefix(40)) (path, from, ns)")
            }
        }
        let identity = try feedIdentity(request: request, req: req, channel: channel, base: base)
        // The feed's definitions, cursors and retained log are this node's state: a member that
        // restarted behind would answer 404 (no such feed yet) or 410 (cursor ahead of its state).
        try await catchUp.wait()
        if from == nil, let last = request.headers[HTTPField.Name("Last-Event-ID")!] {
            guard let n = UInt64(last) else { throw RestError.badRequest("Last-Event-ID must be a cursor (a log index)") }
            from = n
        }
        guard let path else { throw RestError.badRequest("\"path\" (the feed's pattern) is required") }
        let pattern: TriggerPattern
        do { pattern = try TriggerPattern(parsing: path) } catch { throw RestError.badRequest("path: \(error.reason)") }
        let ns = req.namespace ?? config.defaultNamespace
        let port = try triggersPort()
        guard let feed = try port.triggers(namespace: ns).first(where: { $0.definition.feed && $0.definition.pattern == pattern }) else {
            throw RestError(404, "No feed for \(pattern) in namespace \(ns): define one in /.settings/triggers.json with \"feed\": true")
        }
        let name = feed.definition.name
        let cursor = from ?? feed.state.cursor
        if cursor < feed.state.cursor {
            var headers = HTTPFields()
            headers[.contentType] = "application/json; charset=utf-8"
            let body: JSON = .object(["error": .string("Cursor \(cursor) is older than the feed keeps; resume from \(feed.state.cursor)"),
                                      "oldest": .int(Int64(feed.state.cursor))])
            return Response(status: .gone, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body.serializedBytes())))
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream; charset=utf-8"
        headers[.cacheControl] = "no-cache"
        headers[.accessControlAllowOrigin] = "*"
        let keepAlive = Duration.seconds(Int64(max(1, config.keepAliveSeconds)))
        let start = cursor
        let gate = self.gate, clock = self.clock, hub = self.hub
        let body = ResponseBody { writer in
            var cursor = start
            var idle = Duration.zero
            // Ends when the node stops (the graceful shutdown waits for every response) or the
            // consumer is gone: an idle feed's write fails only at its next keep-alive, and the
            // shutdown waited for it (up to a minute with the default keep-alive).
            while !Task.isCancelled, !hub.isClosed, channel?.isActive ?? true {
                // A token that expired ends the stream (the consumer resumes with a fresh one).
                if case .user(_, let expiresAt?) = identity, expiresAt <= clock() { break }
                // Entries trimmed past this consumer's position: end the stream (it resumes and
                // is answered 410 with the oldest cursor).
                guard let state = try port.state(namespace: ns, trigger: name), cursor >= state.cursor else { break }
                let rows = try port.outbox(namespace: ns, trigger: name, after: cursor, limit: Self.feedRowsPerRead)
                for r in rows {
                    cursor = r.index
                    var events = r.events
                    if !identity.isAdmin {
                        let now = clock()
                        events = try events.filter { try gate.canRead(ns, $0.location, identity, query: nil, now: now) }
                        if events.isEmpty { continue }
                    }
                    let data = String(decoding: TriggerEvent.cloudEventBody(events, namespace: ns, trigger: name, batch: true), as: UTF8.self)
                    try await writer.write(ByteBuffer(string: "id: \(r.index)\nevent: change\ndata: \(data)\n\n"))
                }
                if rows.isEmpty {
                    try await Task.sleep(for: Self.feedPoll)
                    idle += Self.feedPoll
                    if idle >= keepAlive {
                        try await writer.write(ByteBuffer(string: "event: keep-alive\ndata: null\n\n"))
                        idle = .zero
                    }
                } else {
                    idle = .zero
                }
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// The feed's reader: an admin (token or client certificate), or the identity of a valid auth
    /// token (its events filtered by the rules). No credential, a malformed `Authorization` or a
    /// token the node refuses: 401.
    func feedIdentity(request: Request, req: RestRequest, channel: (any Channel)?, base: Identity) throws -> Identity {
        if base.isAdmin { return base }
        if req.authToken == nil, request.headers[.authorization] != nil, ClientCredentials.token(query: nil, headers: request.headers) == nil {
            throw RestError(401, "Authorization must be 'Bearer <token>'")
        }
        let identity = try policy.restIdentity(req, headers: request.headers, channel: channel, base: base)
        guard identity != .anonymous else {
            throw RestError(401, "The feed requires an admin credential or an auth token (Authorization: Bearer ...)")
        }
        return identity
    }
}
