import EmberCore
import EmberProtocol
import Testing

/// The client's wire-protocol state machine alone: messages in, effects out, no sockets or clocks.
@Suite struct WireClientSessionTests {
    typealias Effect = WireClientSession.Effect

    static func p(_ s: String) -> Path { try! Path(s) }
    static func noHash(_: Int) -> String { "h" }
    static let hello = WireServerMessage.hello(timestamp: 1_000, host: "n1", sessionID: "s", nodes: nil)

    /// The requests among `effects`, as (r, action, body).
    static func requests(_ effects: [Effect]) -> [(r: Int64, action: String, body: KeyMap<JSON>)] {
        effects.compactMap {
            if case .send(.request(let r, let action, let body)) = $0 { return (r, action, body) }
            return nil
        }
    }

    static func connected(credential: String? = nil) -> WireClientSession {
        var s = WireClientSession(credential: credential)
        s.opened()
        _ = s.receive(hello, hash: noHash)
        return s
    }

    @Test func handshakeSendsCredentialThenListensInOrderThenWritesThenGets() {
        var s = WireClientSession(credential: "a.b.c")
        let l2 = s.listen(path: Self.p("b"), query: nil, tag: nil, hash: Self.noHash)
        let l1 = s.listen(path: Self.p("a"), query: .object(["l": .int(2)]), tag: 7, hash: Self.noHash)
        let w1 = s.write(action: "p", path: Self.p("x"), data: .int(1))
        let w2 = s.write(action: "m", path: Self.p("y"), data: .object(["k": .int(2)]), stamp: .object(["id": .string("w"), "n": .int(2)]))
        let g = s.get(path: Self.p("z"), query: nil)
        // Nothing leaves before a connection; the get waits for one.
        #expect(l1.effects.isEmpty && l2.effects.isEmpty && w1.effects.isEmpty && w2.effects.isEmpty)
        #expect(g.effects == [.armGetTimeout(g.id)])

        s.opened()
        #expect(!s.isConnected)
        let out = s.receive(Self.hello, hash: { "hash\($0)" })
        #expect(out.first == .connected(serverTimeMs: 1_000, nodes: nil))
        let sent = Self.requests(out)
        #expect(sent.map(\.action) == ["auth", "q", "q", "p", "m", "g"])
        #expect(sent.map(\.r) == [1, 2, 3, 4, 5, 6])
        #expect(sent[1].body["p"] == .string("b") && sent[1].body["h"] == .string("hash\(l2.id)"))
        #expect(sent[2].body["t"] == .int(7) && sent[2].body["q"] == .object(["l": .int(2)]))
        #expect(sent[4].body["w"] == .object(["id": .string("w"), "n": .int(2)]))
        #expect(s.isConnected && s.awaitedResponses == 6)
    }

    @Test func adminTokensUseGauthAndRefusalsAreReported() {
        var s = WireClientSession(credential: "owner")
        s.opened()
        let out = s.receive(Self.hello, hash: Self.noHash)
        let auth = Self.requests(out)[0]
        #expect(auth.action == "gauth" && auth.body["cred"] == .string("owner"))
        #expect(s.receive(.response(r: auth.r, status: "invalid_token", data: .null), hash: Self.noHash)
                == [.credentialRefused(status: "invalid_token")])
        let unauth = s.setCredential(nil)
        #expect(Self.requests(unauth).map(\.action) == ["unauth"])
    }

    @Test func responsesCompleteWhatTheyBelongToOnce() {
        var s = Self.connected()
        let w = s.write(action: "p", path: Self.p("a"), data: .int(1))
        let g = s.get(path: Self.p("a"), query: nil)
        let rw = Self.requests(w.effects)[0].r, rg = Self.requests(g.effects)[0].r
        #expect(s.receive(.response(r: rg, status: "ok", data: .int(1)), hash: Self.noHash)
                == [.getCompleted(g.id, status: "ok", data: .int(1))])
        #expect(s.receive(.response(r: rw, status: "ok", data: .null), hash: Self.noHash)
                == [.writeCompleted(w.id, status: "ok", data: .null)])
        // A second answer to the same number, or one nobody asked for, completes nothing.
        #expect(s.receive(.response(r: rw, status: "ok", data: .null), hash: Self.noHash).isEmpty)
        #expect(s.receive(.response(r: 999, status: "ok", data: .null), hash: Self.noHash).isEmpty)
        #expect(s.outstandingWrites == 0 && s.awaitedResponses == 0)
    }

    @Test func droppedConnectionFailsSentCompareAndSetsAndResendsTheRest() {
        var s = Self.connected()
        let plain = s.write(action: "p", path: Self.p("a"), data: .int(1))
        let cas = s.write(action: "p", path: Self.p("b"), data: .int(2), hash: "abc")
        let g = s.get(path: Self.p("c"), query: nil)
        let closed = s.closed()
        // The CAS may or may not have applied: it fails so the transaction reruns it.
        #expect(closed == [.writeCompleted(cas.id, status: "disconnect", data: .null)])
        #expect(s.awaitedResponses == 0)
        // Answers of the old connection arriving late complete nothing.
        #expect(s.receive(.response(r: Self.requests(plain.effects)[0].r, status: "ok", data: .null), hash: Self.noHash).isEmpty)
        s.opened()
        let again = Self.requests(s.receive(Self.hello, hash: Self.noHash))
        #expect(again.map(\.action) == ["p", "g"])
        #expect(again[0].body["p"] == .string("a"))
        #expect(s.receive(.response(r: again[1].r, status: "ok", data: .null), hash: Self.noHash)
                == [.getCompleted(g.id, status: "ok", data: .null)])
    }

    @Test func aGetWithoutConnectionFailsOfflineUnlessSentFirst() {
        var s = WireClientSession()
        let g1 = s.get(path: Self.p("a"), query: nil)
        #expect(s.getTimedOut(g1.id) == [.getCompleted(g1.id, status: "offline", data: .string("Client is offline."))])
        let g2 = s.get(path: Self.p("b"), query: nil)
        s.opened()
        #expect(Self.requests(s.receive(Self.hello, hash: Self.noHash)).map(\.action) == ["g"])
        #expect(s.getTimedOut(g2.id).isEmpty)
    }

    @Test func purgeCancelsQueuedWritesInOrderAndLateAnswersCompleteNothing() {
        var s = Self.connected()
        let a = s.write(action: "p", path: Self.p("a"), data: .int(1))
        let b = s.write(action: "o", path: Self.p("b"), data: .int(2))
        #expect(s.purgeWrites() == [.writeCompleted(a.id, status: "write_canceled", data: .string("Write cancelled by user")),
                                    .writeCompleted(b.id, status: "write_canceled", data: .string("Write cancelled by user"))])
        #expect(s.receive(.response(r: Self.requests(a.effects)[0].r, status: "ok", data: .null), hash: Self.noHash).isEmpty)
    }

    @Test func listeningAgainReplacesAndOnlyTheCurrentListenTakesItsAnswer() {
        var s = Self.connected()
        let first = s.listen(path: Self.p("a"), query: nil, tag: nil, hash: Self.noHash)
        let second = s.listen(path: Self.p("a"), query: nil, tag: nil, hash: Self.noHash)
        #expect(second.replaced == first.id)
        #expect(s.activeListens == 1)
        // The first listen's answer belongs to a listen that no longer exists.
        #expect(s.receive(.response(r: Self.requests(first.effects)[0].r, status: "ok", data: .null), hash: Self.noHash).isEmpty)
        #expect(s.receive(.response(r: Self.requests(second.effects)[0].r, status: "ok", data: .null), hash: Self.noHash)
                == [.listenCompleted(second.id, status: "ok", data: .null)])
        // A failed listen ends: it is not sent again after a reconnect.
        let denied = s.listen(path: Self.p("secret"), query: nil, tag: 3, hash: Self.noHash)
        _ = s.receive(.response(r: Self.requests(denied.effects)[0].r, status: "permission_denied", data: .null), hash: Self.noHash)
        _ = s.closed()
        s.opened()
        let resent = Self.requests(s.receive(Self.hello, hash: Self.noHash))
        #expect(resent.map { $0.body["p"] } == [.string("a")])
    }

    @Test func unlistenSendsTheTaggedQueryAndRevokedListensEnd() {
        var s = Self.connected()
        let tagged = s.listen(path: Self.p("a"), query: .object(["sp": .int(1)]), tag: 4, hash: Self.noHash)
        let plain = s.listen(path: Self.p("b"), query: nil, tag: nil, hash: Self.noHash)
        let un = s.unlisten(path: Self.p("a"), tag: 4)
        #expect(un.removed == tagged.id)
        let n = Self.requests(un.effects)[0]
        #expect(n.action == "n" && n.body == ["p": .string("a"), "t": .int(4), "q": .object(["sp": .int(1)])])
        #expect(s.unlisten(path: Self.p("a"), tag: 4).removed == nil)
        #expect(s.receive(.listenRevoked(path: Self.p("b"), query: nil), hash: Self.noHash)
                == [.listenCompleted(plain.id, status: "permission_denied", data: .string("listen revoked"))])
        #expect(s.activeListens == 0)
    }

    @Test func dataOnlyOnALiveConnectionAndServerControlMessagesAreReported() {
        var s = WireClientSession()
        s.opened()
        let push = WireServerMessage.dataPush(path: Self.p("a"), data: .int(1), isMerge: true, tag: 5, version: 9)
        #expect(s.receive(push, hash: Self.noHash).isEmpty)
        _ = s.receive(Self.hello, hash: Self.noHash)
        // A second hello on the same connection changes nothing.
        #expect(s.receive(Self.hello, hash: Self.noHash).isEmpty)
        #expect(s.receive(push, hash: Self.noHash) == [.data(path: Self.p("a"), data: .int(1), isMerge: true, tag: 5)])
        #expect(s.receive(.authRevoked(status: "expired_token", reason: "x"), hash: Self.noHash) == [.credentialRevoked])
        #expect(s.receive(.shutdown("bye"), hash: Self.noHash) == [.shutdown(reason: "bye")])
        #expect(s.receive(.pong, hash: Self.noHash).isEmpty)
    }
}
