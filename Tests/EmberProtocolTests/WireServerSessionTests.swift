import EmberCore
import Testing

@testable import EmberProtocol

/// A session's context for the tests: identities, listens and onDisconnect registrations reduced
/// to what the protocol's rules look at.
enum TestWire: WireServerContext {
    enum Identity: Equatable, Sendable {
        case anonymous
        case admin
        case user(String, expiresAt: Int64?)
    }

    struct Listen: WireServerListen {
        let path: Path
        let queryWire: JSON?
        /// Changes folded in before the initial read completed (what `activate` reports).
        var pending = 0
    }

    static func claims(of identity: Identity) -> JSON? {
        if case .user(let uid, _) = identity { return .object(["uid": .string(uid)]) }
        return nil
    }

    static func expiry(of identity: Identity) -> Int64? {
        if case .user(_, let expiresAt) = identity { return expiresAt }
        return nil
    }

    static func outranksTokens(_ identity: Identity) -> Bool { identity == .admin }

    static func cancel(_ writes: [Path], at path: Path) -> [Path] { writes.filter { !path.contains($0) } }
}

typealias Session = WireServerSession<TestWire>

/// Every rule of the server's side of the wire protocol, on the value type alone: messages in,
/// effects out (no socket, no store, no clock).
@Suite struct WireServerSessionTests {
    func p(_ s: String) -> Path { try! Path(s) }

    func request(_ r: Int64, _ action: String, _ body: String) -> Result<WireClientMessage, WireClientMessage.ParseError> {
        WireClientMessage.parse(#"{"t":"d","d":{"r":\#(r),"a":"\#(action)","b":\#(body)}}"#)
    }

    /// Effects as text, so a whole sequence is compared at once.
    func describe(_ effects: [Session.Effect]) -> [String] {
        effects.map { e in
            switch e {
            case .send(let json): "send " + json.serialized()
            case .sendFrame(let frame): "frame " + frame
            case .listenIndexed(let path, let key, let added): (added ? "index+ " : "index- ") + "\(path) \(key)"
            case .identityChanged: "identityChanged"
            case .armExpiry(let generation, let after): "arm \(generation) \(after)"
            case .disarmExpiry: "disarm"
            case .authorizeListen(let r, let l): "authorizeListen \(r) \(l.key)"
            case .readListen(let r, let l): "readListen \(r) \(l.key)"
            case .get(let r, let path, let query): "get \(r) \(path) \(query.map { "\($0)" } ?? "-")"
            case .write(let r, let action, _): "write \(r) \(action)"
            case .registerOnDisconnect(let r, let action, let path, _): "registerOnDisconnect \(r) \(action) \(path)"
            case .cancelOnDisconnect(let r, let path): "cancelOnDisconnect \(r) \(path)"
            case .verifyCredential(let r, let cred): "verify \(r) \(cred)"
            }
        }
    }

    func response(_ r: Int64, _ status: String, _ data: String) -> String {
        #"send {"d":{"b":{"d":\#(data),"s":"\#(status)"},"r":\#(r)},"t":"d"}"#
    }

    func response(_ r: Int64, _ status: String, _ data: JSON) -> String {
        "send " + WireServerMessage.response(r: r, status: status, data: data).json.serialized()
    }

    /// Takes a listen request through `receive` and the rules' approval to its listen.
    func listen(_ s: inout Session, _ r: Int64, _ body: String) -> (Session.ListenRequest, [String]) {
        let effects = s.receive(request(r, "q", body), now: 0)
        guard effects.count == 1, case .authorizeListen(_, let l) = effects[0] else {
            Issue.record("a listen is judged by the rules first: \(describe(effects))")
            return (Session.ListenRequest(path: .root, queryWire: nil, tag: nil, query: .default), [])
        }
        return (l, describe(s.beginListen(r: r, l) { TestWire.Listen(path: l.path, queryWire: l.queryWire) }))
    }

    // MARK: - Handshake and control messages

    @Test func helloCarriesTheClusterURLsOnlyWhenThereAreSome() {
        let alone = Session.hello(timestamp: 7, host: "h:1", sessionID: "s1", nodes: [])
        #expect(WireServerMessage.parse(alone.serialized()) == .hello(timestamp: 7, host: "h:1", sessionID: "s1", nodes: nil))
        let cluster = Session.hello(timestamp: 7, host: "h:1", sessionID: "s1", nodes: ["ws://a", "ws://b"])
        #expect(WireServerMessage.parse(cluster.serialized()) == .hello(timestamp: 7, host: "h:1", sessionID: "s1", nodes: ["ws://a", "ws://b"]))
    }

    @Test func controlMessagesAndBadInput() {
        var s = Session(base: .anonymous)
        #expect(describe(s.receive(.success(.ping), now: 0)) == ["send " + WireServerMessage.pong.json.serialized()])
        #expect(describe(s.receive(.success(.ignored), now: 0)).isEmpty)
        #expect(describe(s.receive(WireClientMessage.parse("not json"), now: 0))
            == ["send " + WireServerMessage.protocolError("Invalid message").json.serialized()])
        #expect(describe(s.receive(WireClientMessage.parse(#"{"t":"d","d":{"a":"q"}}"#), now: 0))
            == ["send " + WireServerMessage.protocolError("Request without r or a").json.serialized()])
        #expect(describe(s.receive(request(3, "zz", "{}"), now: 0)) == [response(3, "invalid_request", .string("Unknown action zz"))])
        for action in ["s", "appcheck", "unappcheck"] {
            #expect(describe(s.receive(request(4, action, #"{"c":{"x":1}}"#), now: 0)) == [response(4, "ok", #""""#)])
        }
        // A request whose path is not a path fails with invalid_data, whatever the action.
        for action in ["q", "n", "g", "o", "om", "oc"] {
            let effects = describe(s.receive(request(5, action, #"{"p":"a/b[c"}"#), now: 0))
            #expect(effects.count == 1 && effects[0].contains(#""s":"invalid_data""#), "\(action): \(effects)")
        }
        #expect(describe(s.receive(request(6, "g", "{}"), now: 0))
            == [response(6, "invalid_data", .string(EmberError.invalidData("request needs a path p").description))])
    }

    @Test func requestsForTheStoreBecomeOperations() {
        var s = Session(base: .anonymous)
        #expect(describe(s.receive(request(1, "g", #"{"p":"a/b","q":{}}"#), now: 0)) == ["get 1 /a/b -"])
        let withQuery = describe(s.receive(request(2, "g", #"{"p":"a","q":{"l":3,"vf":"l"}}"#), now: 0))
        #expect(withQuery.count == 1 && withQuery[0].hasPrefix("get 2 /a ") && !withQuery[0].hasSuffix(" -"))
        #expect(describe(s.receive(request(3, "p", #"{"p":"a","d":1}"#), now: 0)) == ["write 3 p"])
        #expect(describe(s.receive(request(4, "m", #"{"p":"a","d":{"x":1}}"#), now: 0)) == ["write 4 m"])
        #expect(Session.isWrite("p") && Session.isWrite("m") && !Session.isWrite("o") && !Session.isWrite("q"))
        #expect(describe(s.receive(request(5, "o", #"{"p":"/presence/me","d":null}"#), now: 0)) == ["registerOnDisconnect 5 o /presence/me"])
        #expect(describe(s.receive(request(6, "om", #"{"p":"presence","d":{"me":null}}"#), now: 0)) == ["registerOnDisconnect 6 om /presence"])
        #expect(describe(s.receive(request(7, "oc", #"{"p":"presence"}"#), now: 0)) == ["cancelOnDisconnect 7 /presence"])
    }

    // MARK: - Listens

    @Test func aListenSendsItsDataThenOk() {
        var s = Session(base: .anonymous)
        let (l, begun) = listen(&s, 1, #"{"p":"/rooms/a","h":"","q":{"l":5}}"#)
        // Untagged: the query is ignored (the client gets the whole location) and not in the key.
        #expect(l.queryWire == nil && l.tag == nil && l.key == "/rooms/a|")
        #expect(begun == ["index+ /rooms/a /rooms/a|", "readListen 1 /rooms/a|"])
        let data: JSON = .object(["t": .string("d")])
        let done = s.listenRead(r: 1, l, indexed: false) { listen in
            listen.pending += 1
            return [data]
        }
        // Data first, then ok: clients mark their cache complete on ok. No index warning untagged.
        #expect(describe(done) == ["send " + data.serialized(), response(1, "ok", "{}")])
        #expect(s.withListen(l.key) { $0.pending } == 1)
        #expect(s.listenCount == 1)
    }

    @Test func taggedListensAreKeyedByQueryAndWarnWithoutAnIndex() {
        var s = Session(base: .anonymous)
        let (a, _) = listen(&s, 1, #"{"p":"scores","t":1,"q":{"i":"score","l":3,"vf":"r"}}"#)
        let (b, begunB) = listen(&s, 2, #"{"p":"scores","t":2,"q":{"i":"score","l":1,"vf":"l"}}"#)
        #expect(a.key != b.key && a.tag == 1 && b.tag == 2)
        #expect(begunB.count == 2)
        #expect(describe(s.listenRead(r: 1, a, indexed: false) { _ in [] }) == [response(1, "ok", #"{"w":["no_index"]}"#)])
        #expect(describe(s.listenRead(r: 2, b, indexed: true) { _ in [] }) == [response(2, "ok", "{}")])
        // A bad query is the client's error.
        let bad = describe(s.receive(request(3, "q", #"{"p":"scores","t":3,"q":{"l":-1}}"#), now: 0))
        #expect(bad.count == 1 && bad[0].contains("invalid_data"))
    }

    @Test func duplicatesTooManyAndUnlisten() {
        var s = Session(base: .anonymous, limits: .init(maxListens: 2, maxOnDisconnect: 1))
        let (a, _) = listen(&s, 1, #"{"p":"a"}"#)
        // The same listen again: ok at once, nothing indexed or read twice.
        #expect(listen(&s, 2, #"{"p":"a"}"#).1 == [response(2, "ok", "{}")])
        _ = listen(&s, 3, #"{"p":"b"}"#)
        #expect(listen(&s, 4, #"{"p":"c"}"#).1 == [response(4, "too_many_listens", .string("Too many listens on this connection (limit 2)"))])
        #expect(describe(s.receive(request(5, "n", #"{"p":"a"}"#), now: 0)) == ["index- /a /a|", response(5, "ok", "{}")])
        // Unlistening what is not listened is still ok, with nothing to unindex.
        #expect(describe(s.receive(request(6, "n", #"{"p":"a"}"#), now: 0)) == [response(6, "ok", "{}")])
        // A listen ended before its read completed sends nothing.
        #expect(describe(s.listenRead(r: 1, a, indexed: true) { _ in [.null] }).isEmpty)
        #expect(listen(&s, 7, #"{"p":"c"}"#).1.count == 2)
    }

    @Test func aFailedInitialReadEndsTheListen() {
        var s = Session(base: .anonymous)
        let (l, _) = listen(&s, 1, #"{"p":"a"}"#)
        #expect(describe(s.listenReadFailed(r: 1, l, .unavailable("no quorum")))
            == ["index- /a /a|", response(1, "unavailable", .string("no quorum"))])
        #expect(s.listenCount == 0)
    }

    // MARK: - Credential and expiry

    @Test func authChangesTheIdentityAndArmsItsExpiry() {
        var s = Session(base: .anonymous)
        #expect(describe(s.receive(request(1, "auth", "{}"), now: 0)) == [response(1, "invalid_token", .string("auth needs cred"))])
        #expect(describe(s.receive(request(2, "auth", #"{"cred":"tok"}"#), now: 1_000)) == ["verify 2 tok"])
        let accepted = s.credentialVerified(r: 2, .user("u1", expiresAt: 61_000), now: 1_000)
        // The listens are judged again before the response; the expiry is in seconds.
        #expect(describe(accepted) == ["disarm", "arm 1 60000", "identityChanged",
                                       response(2, "ok", #"{"auth":{"uid":"u1"},"expires":61}"#)])
        #expect(s.identity == .user("u1", expiresAt: 61_000))
        // The same identity again: no re-judging.
        #expect(!describe(s.credentialVerified(r: 3, .user("u1", expiresAt: 61_000), now: 2_000)).contains("identityChanged"))
        // Refused: back to the base identity, with the verifier's status.
        let refused = s.credentialRefused(r: 4, status: "expired_token", message: "Auth token is expired.", now: 3_000)
        #expect(describe(refused) == ["disarm", "identityChanged", response(4, "expired_token", .string("Auth token is expired."))])
        #expect(s.identity == .anonymous)
    }

    @Test func unauthReturnsToTheBaseAndAdminOutranksTokens() {
        var s = Session(base: .anonymous)
        _ = s.credentialVerified(r: 1, .user("u", expiresAt: nil), now: 0)
        #expect(describe(s.receive(request(2, "unauth", "{}"), now: 0)) == ["disarm", "identityChanged", response(2, "ok", #""""#)])
        var admin = Session(base: .admin)
        // An admin client certificate: auth is answered without verifying, and changes nothing.
        #expect(describe(admin.receive(request(1, "gauth", #"{"cred":"tok"}"#), now: 0))
            == [response(1, "ok", #"{"auth":null,"expires":null}"#)])
        #expect(admin.identity == .admin)
    }

    @Test func expiryRevokesTheCredentialAndOnlyTheCurrentTimerCounts() {
        var s = Session(base: .anonymous)
        _ = s.credentialVerified(r: 1, .user("u", expiresAt: 5_000), now: 0)
        let first = s.identityGeneration
        // Re-auth before expiry: the first timer is stale.
        _ = s.credentialVerified(r: 2, .user("u", expiresAt: 9_000), now: 1_000)
        #expect(describe(s.expiryTimerFired(generation: first)).isEmpty)
        #expect(s.identity == .user("u", expiresAt: 9_000))
        let expired = s.expiryTimerFired(generation: s.identityGeneration)
        #expect(describe(expired) == ["send " + WireServerMessage.authRevoked(status: "expired_token", reason: "Auth token is expired.").json.serialized(),
                                      "identityChanged"])
        #expect(s.identity == .anonymous)
        // A closed session's timer does nothing, and a closed session arms none.
        var closed = Session(base: .anonymous)
        _ = closed.credentialVerified(r: 1, .user("u", expiresAt: 5_000), now: 0)
        #expect(describe(closed.close(reason: "bye")) == ["disarm"])
        #expect(describe(closed.close(reason: "again")).isEmpty && closed.closeReason == "bye")
        #expect(describe(closed.expiryTimerFired(generation: closed.identityGeneration)).isEmpty)
        #expect(!describe(closed.credentialVerified(r: 2, .user("u", expiresAt: 9_000), now: 0)).contains { $0.hasPrefix("arm") })
    }

    /// A listen made before auth and one made after: expiry drops the identity, and the listens the
    /// rules no longer allow end with `c` (the query echoed), in key order; the others stay.
    @Test func expiredAuthRevokesTheListensItAllowed() {
        var s = Session(base: .anonymous)
        let (open, _) = listen(&s, 1, #"{"p":"public"}"#)
        _ = s.credentialVerified(r: 2, .user("u", expiresAt: 5_000), now: 0)
        let (mine, _) = listen(&s, 3, #"{"p":"users/u","t":7,"q":{"l":2,"vf":"l"}}"#)
        #expect(describe(s.expiryTimerFired(generation: s.identityGeneration)).last == "identityChanged")
        let allowed: (TestWire.Listen, TestWire.Identity) -> Bool = { l, identity in
            l.path == open.path || identity != .anonymous
        }
        let revoked = s.revokeListens(stillAllowed: allowed)
        #expect(describe(revoked) == ["index- \(mine.path) \(mine.key)",
                                      "send " + WireServerMessage.listenRevoked(path: mine.path, query: mine.queryWire).json.serialized()])
        #expect(s.listenCount == 1 && s.withListen(open.key) { $0.path } == open.path)
        // Judged again with nothing to revoke: nothing.
        #expect(describe(s.revokeListens(stillAllowed: allowed)).isEmpty)
    }

    // MARK: - onDisconnect and failures

    @Test func onDisconnectRegistrationsAreCountedAndCancelled() {
        var s = Session(base: .anonymous, limits: .init(maxListens: 10, maxOnDisconnect: 2))
        let (first, second, third) = (s.addOnDisconnect(p("a/x")), s.addOnDisconnect(p("b")), s.addOnDisconnect(p("c")))
        #expect(first && second && !third)
        #expect(Session.tooManyOnDisconnect.response(9) == .response(r: 9, status: "too_many_requests", data: .string("Too many onDisconnect operations")))
        s.cancelOnDisconnect(at: p("a"))
        #expect(s.onDisconnect == [p("b")])
        let again = s.addOnDisconnect(p("c"))
        #expect(again)
        s.removeLastOnDisconnect()
        #expect(s.onDisconnect == [p("b")])
    }

    @Test func failuresCarryTheirStatus() {
        let s = Session(base: .anonymous)
        let cases: [(WireFailure, String)] = [
            (.invalidData("x"), "invalid_data"), (.tooManyRequests("x"), "too_many_requests"), (.unavailable("x"), "unavailable"),
            (.permissionDenied("x"), "permission_denied"), (.insufficientStorage("x"), "insufficient_storage"),
            (.internalError("x"), "internal_error"),
        ]
        for (failure, status) in cases {
            #expect(describe(s.failed(4, failure)) == [response(4, status, .string("x"))])
        }
        #expect(describe(s.refused(5, "slow down")) == [response(5, "too_many_requests", .string("slow down"))])
        #expect(describe(s.answer(6, .string(""))) == [response(6, "ok", #""""#)])
    }
}

/// What a client's WebSocket URL names: the endpoint, the namespace and the session it replaces.
@Suite struct WireConnectTargetTests {
    @Test func theEndpointAndItsParameters() {
        for uri in ["/.ws", "/.ws?v=5", "/.ws/x"] { #expect(WireConnectTarget.endpoint(Substring(uri)) != nil, "\(uri)") }
        for uri in ["/", "/.wsx", "/a/.ws", "/.ws.json"] { #expect(WireConnectTarget.endpoint(Substring(uri)) == nil, "\(uri)") }
        let plain = WireConnectTarget(target: "/.ws?v=5", defaultNamespace: "default")
        #expect(plain == WireConnectTarget(target: "/.ws", defaultNamespace: "default"))
        #expect(plain.namespace == "default" && plain.lastSession == nil)
        let named = WireConnectTarget(target: "/.ws?v=5&ns=first&ns=game-1&ls=0a1b2c", defaultNamespace: "default")
        #expect(named.namespace == "game-1" && named.lastSession == "0a1b2c")
        // A namespace that is not a key, and an `ls` that cannot be one of our ids, are ignored.
        let bad = WireConnectTarget(target: "/.ws?ns=a%2Fb&ls=ABC", defaultNamespace: "default")
        #expect(bad.namespace == "default" && bad.lastSession == nil)
        let long = String(repeating: "a", count: WireConnectTarget.maxLastSessionBytes + 1)
        #expect(WireConnectTarget(target: Substring("/.ws?ls=" + long), defaultNamespace: "d").lastSession == nil)
        #expect(WireConnectTarget(target: Substring("/.ws?ls=" + long.dropLast()), defaultNamespace: "d").lastSession != nil)
    }
}
