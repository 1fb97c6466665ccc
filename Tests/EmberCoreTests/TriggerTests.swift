import Testing
@testable import EmberCore

private func pth(_ s: String) -> Path { try! Path(s) }
private func nd(_ s: String) -> Node { try! Node(json: JSON.parse(s)) }
private func def(_ json: String, name: String = "t") throws -> TriggerDefinition {
    try TriggerDefinition(name: name, json: JSON.parse(json))
}
private let valid = #"{"path": "/messages/{id}", "on": ["created"], "url": "http://127.0.0.1:8080/hook", "secret": "0123456789abcdef"}"#

/// Trigger definitions: parsing, validation and their limits (issue 36).
@Suite struct TriggerDefinitionTests {
    @Test func patternsMatchConcretePaths() throws {
        let pat = try TriggerPattern(parsing: "/rooms/{room}/messages/{id}")
        #expect(pat.match(pth("/rooms/r1/messages/m1")) == ["room": "r1", "id": "m1"])
        #expect(pat.match(pth("/rooms/r1/msgs/m1")) == nil)
        #expect(pat.match(pth("/rooms/r1/messages")) == nil)
        #expect(pat.scope(of: pth("/rooms/r1/messages/m1/text")) == pth("/rooms/r1/messages/m1"))
        #expect(pat.scope(of: pth("/rooms")) == pth("/rooms"))
        #expect(pat.scope(of: .root) == .root)
        #expect(pat.scope(of: pth("/users/x")) == nil)
        #expect(pat.description == "/rooms/{room}/messages/{id}")
        #expect(try TriggerPattern(parsing: "/").count == 0)
    }

    @Test func badPatternsAreRefusedWithTheReason() {
        for (text, reason) in [("messages/{id}", "start with '/'"), ("/m/{id", "not a {wildcard}"), ("/m/{1d}", "wildcard name"),
                               ("/m/{a}/n/{a}", "appears twice"), ("/m/a.b", "path:"), ("/m/{}", "not a {wildcard}")] {
            #expect(throws: TriggerDefinitionError.self) { try TriggerPattern(parsing: text) }
            do { _ = try TriggerPattern(parsing: text) } catch { #expect(error.reason.contains(reason), "\(text): \(error.reason)") }
        }
    }

    @Test func definitionsParseWithDefaults() throws {
        let d = try def(valid)
        #expect(d.on == [.created] && d.url?.host == "127.0.0.1" && d.url?.port == 8080 && d.url?.target == "/hook" && d.url?.tls == false && !d.feed)
        #expect(d.limits == TriggerLimits())
        #expect(d.firedType(for: .created) == .created && d.firedType(for: .deleted) == nil)
        let w = try def(#"{"path": "/a", "on": ["written", "deleted"], "url": "https://h.example", "secret": "0123456789abcdef", "retries": 2, "batchSize": 10, "onFailure": "stop"}"#)
        #expect(w.firedType(for: .deleted) == .deleted && w.firedType(for: .created) == .written)
        #expect(w.url?.tls == true && w.url?.port == 443 && w.url?.target == "/" && w.limits.retries == 2 && w.limits.batchSize == 10 && w.limits.onFailure == .stop)
        // The canonical form round-trips.
        #expect(try TriggerDefinition(name: "t", json: w.json) == w)
    }

    @Test func badDefinitionsAreRefusedWithTheReason() throws {
        let cases: [(String, String)] = [
            (#"{"on": ["created"], "url": "http://h/", "secret": "0123456789abcdef"}"#, "\"path\""),
            (#"{"path": "/a", "on": [], "url": "http://h/", "secret": "0123456789abcdef"}"#, "\"on\""),
            (#"{"path": "/a", "on": ["changed"], "url": "http://h/", "secret": "0123456789abcdef"}"#, "\"on\""),
            (#"{"path": "/a", "on": ["created"], "url": "ftp://h/", "secret": "0123456789abcdef"}"#, "http"),
            (#"{"path": "/a", "on": ["created"], "url": "http://:80/", "secret": "0123456789abcdef"}"#, "no host"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h:99999/", "secret": "0123456789abcdef"}"#, "port"),
            (#"{"path": "/a", "on": ["created"], "url": "http://u@h/", "secret": "0123456789abcdef"}"#, "user info"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h/", "secret": "short"}"#, "secret"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "retries": -1}"#, "retries"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "batchSize": 1.5}"#, "batchSize"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "backoffMs": 500, "maxBackoffMs": 100}"#, "maxBackoffMs"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "onFailure": "retry"}"#, "onFailure"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "colour": 1}"#, "unknown field"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "batchWindowMs": 50}"#, "\"batchSize\" above 1"),
            (#"{"path": "/a", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "batchSize": 9, "batchWindowMs": 60001}"#, "batchWindowMs"),
            (#"[1]"#, "an object"),
        ]
        for (json, reason) in cases {
            do { _ = try def(json); Issue.record("accepted \(json)") } catch let e as TriggerDefinitionError {
                #expect(e.reason.contains(reason), "\(json): \(e.reason)")
            }
        }
        #expect(throws: TriggerDefinitionError.self) { try def(valid, name: "bad name") }
        // A feed has neither a URL nor a secret.
        let feed = try def(#"{"path": "/a/{id}", "on": ["written"], "feed": true}"#)
        let again = try TriggerDefinition(name: "t", json: feed.json)
        #expect(feed.feed && feed.url == nil && again == feed)
        #expect(throws: TriggerDefinitionError.self) { try def(#"{"path": "/a/{id}", "on": ["written"], "feed": true, "url": "http://h/"}"#) }
    }

    @Test func aBatchingWindowIsSpelledOutOnlyWhenSet() throws {
        // The logged document is the canonical form: without a window it is what 0.7.0 reads.
        let plain = try def(#"{"path": "/a/{id}", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "batchSize": 10}"#)
        guard case .object(let o) = plain.json else { Issue.record("not an object"); return }
        #expect(o["batchWindowMs"] == nil && o["inFlight"] == .int(1) && plain.limits.batchWindowMs == 0)
        let windowed = try def(#"{"path": "/a/{id}", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "batchSize": 10, "batchWindowMs": 50}"#)
        guard case .object(let w) = windowed.json else { Issue.record("not an object"); return }
        #expect(w["batchWindowMs"] == .int(50) && windowed.limits.batchWindowMs == 50)
        #expect(try TriggerDefinition(name: "t", json: windowed.json) == windowed)
        let zero = try def(#"{"path": "/a/{id}", "on": ["created"], "url": "http://h/", "secret": "0123456789abcdef", "batchSize": 10, "batchWindowMs": 0}"#)
        #expect(zero == plain)
        // Which documents wait for every member to read the field (peer level 5).
        #expect(TriggerSet.usesBatchWindow("{\"w\": \(windowed.json.serialized())}"))
        #expect(!TriggerSet.usesBatchWindow("{\"p\": \(plain.json.serialized())}"))
        #expect(!TriggerSet.usesBatchWindow("not json"))
    }

    @Test func documentLimits() throws {
        #expect(try TriggerSet(text: "{}").isEmpty)
        let many = (0...TriggerSet.maxTriggers).map { "\"t\($0)\": \(valid)" }.joined(separator: ",")
        #expect(throws: TriggerDefinitionError.self) { try TriggerSet(text: "{\(many)}") }
        #expect(throws: TriggerDefinitionError.self) { try TriggerSet(text: "not json") }
        let two = try TriggerSet(text: "{\"b\": \(valid), \"a\": \(valid)}")
        #expect(two.definitions.map(\.name) == ["a", "b"])
        #expect(try TriggerSet(text: two.text) == two)
    }
}

/// The events a committed write makes for a pattern, with before, after, delta and params.
@Suite struct TriggerChangesTests {
    let pattern = try! TriggerPattern(parsing: "/messages/{id}")

    func changes(_ parts: [(String, String)], old: (Path) -> Node) -> [TriggerChange] {
        let ps = parts.map { (pth($0.0), nd($0.1)) }
        let scopes = TriggerChanges.scopes(pattern, parts: ps.map(\.0))
        return TriggerChanges.changes(pattern, parts: ps, before: scopes.map(old))
    }

    @Test func createUpdateDeleteAtTheLocation() {
        let c = changes([("/messages/m1", #"{"text": "hi"}"#)]) { _ in .empty }
        #expect(c.count == 1 && c[0].kind == .created && c[0].params == ["id": "m1"] && c[0].before.isEmpty)
        #expect(c[0].after == nd(#"{"text": "hi"}"#) && c[0].delta == .object(["text": .string("hi")]))
        let u = changes([("/messages/m1/text", #""bye""#)]) { _ in nd(#"{"text": "hi", "n": 1}"#) }
        #expect(u.count == 1 && u[0].kind == .updated && u[0].location == pth("/messages/m1"))
        #expect(u[0].after == nd(#"{"text": "bye", "n": 1}"#) && u[0].delta == .object(["text": .string("bye")]))
        let d = changes([("/messages/m1", "null")]) { _ in nd(#"{"text": "hi"}"#) }
        #expect(d.count == 1 && d[0].kind == .deleted && d[0].after.isEmpty && d[0].delta == .null)
        // Deleting the last child below the location deletes it.
        let d2 = changes([("/messages/m1/text", "null")]) { _ in nd(#"{"text": "hi"}"#) }
        #expect(d2.count == 1 && d2[0].kind == .deleted && d2[0].delta == .object(["text": .null]))
        // The same value again: no event.
        #expect(changes([("/messages/m1", #"{"text": "hi"}"#)]) { _ in nd(#"{"text": "hi"}"#) }.isEmpty)
    }

    @Test func writesAboveTheLocationsAndMultiPathUpdates() {
        // A set of the whole list: one event per child that changed, in key order.
        let old = nd(#"{"a": 1, "b": 2, "c": 3}"#)
        let c = changes([("/messages", #"{"a": 1, "b": 20, "d": 4}"#)]) { _ in old }
        #expect(c.map(\.location) == [pth("/messages/b"), pth("/messages/c"), pth("/messages/d")])
        #expect(c.map(\.kind) == [.updated, .deleted, .created])
        // A multi-path update at the root touching two messages is two events, and a third
        // part outside the pattern none.
        let m = changes([("/messages/x/text", #""1""#), ("/messages/y", #"{"text": "2"}"#), ("/other", "5")]) { _ in .empty }
        #expect(m.map(\.location) == [pth("/messages/x"), pth("/messages/y")] && m.allSatisfy { $0.kind == .created })
        // Two parts below one location: one event with both in the delta.
        let two = changes([("/messages/x/a", "1"), ("/messages/x/b", "2")]) { _ in .empty }
        #expect(two.count == 1 && two[0].delta == .object(["a": .int(1), "b": .int(2)]))
        // The root replaced: every message of either side.
        let root = changes([("/", #"{"messages": {"z": 1}}"#)]) { _ in nd(#"{"messages": {"a": 1}, "x": 1}"#) }
        #expect(root.map(\.location) == [pth("/messages/a"), pth("/messages/z")])
    }

    @Test func nestedWildcards() throws {
        let pat = try TriggerPattern(parsing: "/rooms/{room}/messages/{id}")
        let parts = [(pth("/rooms"), nd(#"{"r1": {"messages": {"m1": "a", "m2": "b"}}, "r2": {"messages": {"m3": "c"}, "title": "t"}}"#))]
        let c = TriggerChanges.changes(pat, parts: parts, before: [.empty])
        #expect(c.map(\.params) == [["room": "r1", "id": "m1"], ["room": "r1", "id": "m2"], ["room": "r2", "id": "m3"]])
    }
}

/// The delivery decisions: batches, window, retries with backoff, dead letters, stop.
@Suite struct TriggerDeliveryTests {
    func limits(_ body: (inout TriggerLimits) -> Void) -> TriggerLimits {
        var l = TriggerLimits()
        body(&l)
        return l
    }

    @Test func deliversInOrderAndSettlesWholeEntries() {
        var m = TriggerDelivery(limits: limits { $0.batchSize = 2 }, seed: 1)
        m.take(index: 5, events: 3)
        m.take(index: 7, events: 1)
        var a = m.poll(now: 0)
        #expect(a == [.send(batch: 1, events: [.init(index: 5, seq: 0, last: false), .init(index: 5, seq: 1, last: false)])])
        #expect(m.poll(now: 0).isEmpty, "window of one")
        // Entry 5 is not settled until its third event is delivered.
        #expect(m.completed(batch: 1, error: nil, now: 1).isEmpty)
        a = m.poll(now: 1)
        #expect(a == [.send(batch: 2, events: [.init(index: 5, seq: 2, last: true), .init(index: 7, seq: 0, last: true)])])
        #expect(m.completed(batch: 2, error: nil, now: 2) == [.settle(indexes: [5, 7], deadLetter: nil)])
        #expect(m.isIdle && m.takenThrough == 7)
    }

    @Test func retriesBackOffExponentiallyUpToTheCeilingThenDeadLetter() {
        var m = TriggerDelivery(limits: limits { $0.retries = 4; $0.backoffMs = 100; $0.maxBackoffMs = 300 }, seed: 1)
        m.take(index: 1, events: 1)
        m.take(index: 2, events: 1)
        var now: Int64 = 0
        var waits: [Int64] = []
        _ = m.poll(now: now)
        for attempt in 1...4 {
            #expect(m.completed(batch: 1, error: "HTTP 500", now: now).isEmpty)
            let wake = m.nextWake!
            waits.append(wake - now)
            // Nothing is sent before the retry is due, not even the next event.
            #expect(m.poll(now: wake - 1).isEmpty, "attempt \(attempt)")
            now = wake
            #expect(m.poll(now: now) == [.send(batch: 1, events: [.init(index: 1, seq: 0, last: true)])])
        }
        // The nominal waits double up to the ceiling (100, 200, 300, 300); each is jittered
        // down by at most half.
        #expect(zip(waits, [100, 200, 300, 300] as [Int64]).allSatisfy { w, d in w >= d / 2 && w <= d }, "\(waits)")
        #expect(m.completed(batch: 1, error: "HTTP 500", now: now) == [.settle(indexes: [1], deadLetter: "HTTP 500 (after 5 attempts)")])
        #expect(m.lastError == "HTTP 500")
        #expect(m.poll(now: now) == [.send(batch: 2, events: [.init(index: 2, seq: 0, last: true)])])
        #expect(m.completed(batch: 2, error: nil, now: now) == [.settle(indexes: [2], deadLetter: nil)])
    }

    /// Every retry's wait of a batch that keeps failing (nominal 1,000 ms each), with `seed`.
    func retryWaits(seed: UInt64, count: Int) -> [Int64] {
        var m = TriggerDelivery(limits: limits { $0.retries = 1_000; $0.backoffMs = 1_000; $0.maxBackoffMs = 1_000 }, seed: seed)
        m.take(index: 1, events: 1)
        var now: Int64 = 0
        var waits: [Int64] = []
        _ = m.poll(now: now)
        for _ in 0..<count {
            _ = m.completed(batch: 1, error: "HTTP 503", now: now)
            let wake = m.nextWake!
            waits.append(wake - now)
            now = wake
            _ = m.poll(now: now)
        }
        return waits
    }

    @Test func retryWaitsAreJitteredBetweenHalfAndAllOfTheBackoffReplayablyPerSeed() {
        let a = retryWaits(seed: 7, count: 300)
        #expect(a == retryWaits(seed: 7, count: 300), "the same seed draws the same waits")
        #expect(a != retryWaits(seed: 8, count: 300), "another seed draws others")
        #expect(a.allSatisfy { (500...1_000).contains($0) }, "\(a.filter { !(500...1_000).contains($0) })")
        // Spread over the whole range, not a constant: two triggers failing together part.
        #expect(a.min()! < 550 && a.max()! > 950 && Set(a).count > 150, "min \(a.min()!), max \(a.max()!), \(Set(a).count) distinct")
    }

    @Test func stopPolicyHaltsAtTheFailingEvent() {
        var m = TriggerDelivery(limits: limits { $0.retries = 0; $0.onFailure = .stop }, seed: 1)
        m.take(index: 1, events: 1)
        _ = m.poll(now: 0)
        #expect(m.completed(batch: 1, error: "timeout", now: 0) == [.halt(reason: "timeout (after 1 attempts)")])
        #expect(m.poll(now: 1_000_000).isEmpty && m.wants == 0 && m.nextWake == nil)
        m.reset()
        #expect(m.isIdle && m.halted == nil)
    }

    @Test func aWindowSettlesOnlyTheDeliveredPrefix() {
        var m = TriggerDelivery(limits: limits { $0.inFlight = 3 }, seed: 1)
        for i in 1...3 { m.take(index: UInt64(i), events: 1) }
        #expect(m.poll(now: 0).count == 3)
        #expect(m.completed(batch: 3, error: nil, now: 0).isEmpty)
        #expect(m.completed(batch: 2, error: nil, now: 0).isEmpty)
        #expect(m.completed(batch: 1, error: nil, now: 0) == [.settle(indexes: [1, 2, 3], deadLetter: nil)])
    }

    @Test func aWindowGoesBackToTheFailedBatchAndResendsWhatFollowsInOrder() {
        var m = TriggerDelivery(limits: limits { $0.inFlight = 3; $0.backoffMs = 100; $0.maxBackoffMs = 100 }, seed: 1)
        for i in 1...4 { m.take(index: UInt64(i), events: 1) }
        func ev(_ i: UInt64) -> [TriggerDelivery.Event] { [.init(index: i, seq: 0, last: true)] }
        #expect(m.poll(now: 0) == [.send(batch: 1, events: ev(1)), .send(batch: 2, events: ev(2)), .send(batch: 3, events: ev(3))])
        // 2 is delivered, then 1 fails: 2 goes back behind 1; 3 (still in flight) too, whatever
        // its receiver answers.
        #expect(m.completed(batch: 2, error: nil, now: 1).isEmpty)
        #expect(m.completed(batch: 1, error: "HTTP 503", now: 2).isEmpty)
        #expect(m.completed(batch: 3, error: nil, now: 3).isEmpty)
        let due = m.nextWake!
        #expect(due >= 2 + 50 && due <= 2 + 100, "the failed batch's backoff, not the resends' \(due)")
        #expect(m.poll(now: due - 1).isEmpty, "nothing overtakes the failed batch")
        // Resent in log order with the same events (same ids), then the next new one.
        #expect(m.poll(now: due) == [.send(batch: 1, events: ev(1)), .send(batch: 2, events: ev(2)), .send(batch: 3, events: ev(3))])
        #expect(m.nextWake == nil, "window full: the next input is a completion")
        #expect(m.completed(batch: 1, error: nil, now: due) == [.settle(indexes: [1], deadLetter: nil)])
        #expect(m.poll(now: due) == [.send(batch: 4, events: ev(4))])
        #expect(m.completed(batch: 3, error: nil, now: due).isEmpty)
        #expect(m.completed(batch: 2, error: nil, now: due) == [.settle(indexes: [2, 3], deadLetter: nil)])
        #expect(m.completed(batch: 4, error: nil, now: due) == [.settle(indexes: [4], deadLetter: nil)])
        #expect(m.isIdle)
    }

    @Test func nothingOvertakesABatchThatMustGoAgainWhileItsFirstAnswerIsOutstanding() {
        // The failed batch's retry is answered before the first answers of those behind it.
        var m = TriggerDelivery(limits: limits { $0.inFlight = 3; $0.backoffMs = 10; $0.maxBackoffMs = 10 }, seed: 1)
        for i in 1...4 { m.take(index: UInt64(i), events: 1) }
        func ev(_ i: UInt64) -> [TriggerDelivery.Event] { [.init(index: i, seq: 0, last: true)] }
        #expect(m.poll(now: 0).count == 3)
        #expect(m.completed(batch: 1, error: "HTTP 503", now: 0).isEmpty)
        let due = m.nextWake!
        #expect(m.poll(now: due) == [.send(batch: 1, events: ev(1))])
        #expect(m.completed(batch: 1, error: nil, now: due) == [.settle(indexes: [1], deadLetter: nil)])
        #expect(m.poll(now: due).isEmpty, "4 waits: 2 and 3 go again first")
        #expect(m.nextWake == nil, "their answers come first")
        #expect(m.completed(batch: 2, error: nil, now: due).isEmpty)
        #expect(m.poll(now: due) == [.send(batch: 2, events: ev(2))])
        #expect(m.completed(batch: 3, error: nil, now: due).isEmpty)
        #expect(m.poll(now: due) == [.send(batch: 3, events: ev(3)), .send(batch: 4, events: ev(4))])
        #expect(m.completed(batch: 2, error: nil, now: due) == [.settle(indexes: [2], deadLetter: nil)])
        #expect(m.completed(batch: 3, error: nil, now: due) == [.settle(indexes: [3], deadLetter: nil)])
        #expect(m.completed(batch: 4, error: nil, now: due) == [.settle(indexes: [4], deadLetter: nil)])
        #expect(m.isIdle)
    }

    @Test func retriesOfAWindowGoOutInLogOrderWhateverTheirJitter() {
        // Every batch of the window fails (a connection lost): each draws its own wait, yet none
        // is sent before the one ahead of it.
        for seed in 1...50 as ClosedRange<UInt64> {
            var m = TriggerDelivery(limits: limits { $0.inFlight = 4; $0.backoffMs = 1_000; $0.maxBackoffMs = 1_000 }, seed: seed)
            for i in 1...4 { m.take(index: UInt64(i), events: 1) }
            _ = m.poll(now: 0)
            for b in 1...4 as ClosedRange<UInt64> { _ = m.completed(batch: b, error: "connection closed", now: 0) }
            var sent: [UInt64] = []
            var now: Int64 = 0
            while sent.count < 4, let wake = m.nextWake {
                now = max(now, wake)
                for case .send(let b, _) in m.poll(now: now) { sent.append(b) }
            }
            #expect(sent == [1, 2, 3, 4], "seed \(seed)")
        }
    }

    @Test func underLoadAPartialBatchLingersForTheAnswerInFlight() {
        var m = TriggerDelivery(limits: limits { $0.batchSize = 4; $0.inFlight = 8 }, seed: 1)
        func evs(_ r: ClosedRange<UInt64>) -> [TriggerDelivery.Event] { r.map { .init(index: $0, seq: 0, last: true) } }
        // Nothing in flight (a light load): a partial batch goes at once.
        m.take(index: 1, events: 1)
        #expect(!m.lingers(now: 0))
        #expect(m.poll(now: 0) == [.send(batch: 1, events: evs(1...1))])
        // A POST in flight: the next partial batch waits for its answer, and says until when.
        m.take(index: 2, events: 1)
        #expect(m.poll(now: 1).isEmpty)
        #expect(m.lingers(now: 1) && m.readsWait(now: 1) && m.nextWake == 1 + TriggerDelivery.maxLingerMs)
        m.take(index: 3, events: 1)
        #expect(m.poll(now: 2).isEmpty, "still lingering: the wait runs from its first poll")
        // The answer comes: everything queued goes in one POST.
        #expect(m.completed(batch: 1, error: nil, now: 3) == [.settle(indexes: [1], deadLetter: nil)])
        #expect(!m.lingers(now: 3))
        #expect(m.poll(now: 3) == [.send(batch: 2, events: evs(2...3))])
        // A full batch does not wait; the partial rest does, `maxLingerMs` at most.
        for i in 4...8 as ClosedRange<UInt64> { m.take(index: i, events: 1) }
        #expect(m.poll(now: 4) == [.send(batch: 3, events: evs(4...7))])
        #expect(m.lingers(now: 4) && m.nextWake == 4 + TriggerDelivery.maxLingerMs)
        #expect(m.poll(now: 4 + TriggerDelivery.maxLingerMs - 1).isEmpty)
        #expect(!m.lingers(now: 4 + TriggerDelivery.maxLingerMs))
        #expect(m.poll(now: 4 + TriggerDelivery.maxLingerMs) == [.send(batch: 4, events: evs(8...8))])
        #expect(m.nextWake == nil && !m.lingers(now: 100))
        // Without batching nothing lingers.
        var one = TriggerDelivery(limits: limits { $0.batchSize = 1; $0.inFlight = 8 }, seed: 1)
        for i in 1...3 as ClosedRange<UInt64> { one.take(index: i, events: 1) }
        #expect(one.poll(now: 0).count == 3)
        #expect(!one.lingers(now: 0))
    }

    @Test func aBatchingWindowHoldsAPartialBatchEvenWithNothingInFlight() {
        var m = TriggerDelivery(limits: limits { $0.batchSize = 4; $0.inFlight = 2; $0.batchWindowMs = 50 }, seed: 1)
        func evs(_ r: ClosedRange<UInt64>) -> [TriggerDelivery.Event] { r.map { .init(index: $0, seq: 0, last: true) } }
        // Idle, a partial batch waits the window from its first poll, and says until when.
        m.take(index: 1, events: 1)
        #expect(m.poll(now: 10).isEmpty)
        #expect(m.lingers(now: 10) && m.nextWake == 60)
        #expect(!m.readsWait(now: 10), "with a window the worker reads on: a batch that fills goes at once")
        m.take(index: 2, events: 1)
        #expect(m.poll(now: 59).isEmpty && m.lingers(now: 59))
        // The window ends: what queued meanwhile goes in one POST.
        #expect(!m.lingers(now: 60))
        #expect(m.poll(now: 60) == [.send(batch: 1, events: evs(1...2))])
        // A full batch does not wait for the window; the partial rest does, behind the POST in
        // flight too (the window, not `maxLingerMs`, being the longer).
        for i in 3...7 as ClosedRange<UInt64> { m.take(index: i, events: 1) }
        #expect(m.poll(now: 61) == [.send(batch: 2, events: evs(3...6))])
        #expect(!m.lingers(now: 61) && m.nextWake == nil, "the window is full: an answer comes first")
        #expect(m.completed(batch: 1, error: nil, now: 62) == [.settle(indexes: [1, 2], deadLetter: nil)])
        #expect(m.poll(now: 62).isEmpty && m.lingers(now: 62) && m.nextWake == 112)
        #expect(m.poll(now: 111).isEmpty)
        #expect(m.poll(now: 112) == [.send(batch: 3, events: evs(7...7))])
        // A window shorter than `maxLingerMs` waits `maxLingerMs` behind a POST in flight.
        var short = TriggerDelivery(limits: limits { $0.batchSize = 4; $0.inFlight = 2; $0.batchWindowMs = 1 }, seed: 1)
        short.take(index: 1, events: 1)
        #expect(short.poll(now: 0).isEmpty && short.poll(now: 1) == [.send(batch: 1, events: evs(1...1))])
        short.take(index: 2, events: 1)
        #expect(short.poll(now: 2).isEmpty && short.nextWake == 2 + TriggerDelivery.maxLingerMs)
    }

    @Test func aLingeringBatchKeepsEveryEventAndTheOrder() {
        // Seeded loads of entries, answers and clocks: whatever lingers, every event goes out
        // once, in log order, and every entry settles.
        for seed in 1...30 as ClosedRange<UInt64> {
            var r = seed &* 0x9E37_79B9_7F4A_7C15
            func next(_ n: UInt64) -> UInt64 { r = r &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407; return (r >> 33) % n }
            // Half the seeds with a batching window (up to 6 ms): held batches lose and reorder nothing either.
            let window = seed % 2 == 0 ? Int(next(6)) + 1 : 0
            var m = TriggerDelivery(limits: limits { $0.batchSize = Int(next(6)) + 2; $0.inFlight = Int(next(4)) + 1; $0.batchWindowMs = window },
                                    seed: seed)
            var now: Int64 = 0, index: UInt64 = 0
            var sent: [TriggerDelivery.Event] = [], settled: [UInt64] = [], inFlight: [UInt64] = []
            var taken: [UInt64] = []
            for _ in 0..<300 {
                now += Int64(next(3))
                switch next(3) {
                case 0:
                    index += 1 + next(2)
                    m.take(index: index, events: Int(next(3)) + 1)
                    taken.append(index)
                case 1:
                    if !inFlight.isEmpty {
                        for case .settle(let i, _) in m.completed(batch: inFlight.removeFirst(), error: nil, now: now) { settled += i }
                    }
                default: break
                }
                for case .send(let b, let e) in m.poll(now: now) { sent += e; inFlight.append(b) }
            }
            while !m.isIdle {
                now = max(now + 1, m.nextWake ?? now + 1)
                for case .send(let b, let e) in m.poll(now: now) { sent += e; inFlight.append(b) }
                if !inFlight.isEmpty {
                    for case .settle(let i, _) in m.completed(batch: inFlight.removeFirst(), error: nil, now: now) { settled += i }
                }
            }
            #expect(settled == taken, "seed \(seed)")
            #expect(sent.map(\.index) == sent.map(\.index).sorted() && Set(sent.map { "\($0.index)-\($0.seq)" }).count == sent.count, "seed \(seed)")
        }
    }

    @Test func theQueueIsBounded() {
        var m = TriggerDelivery(limits: limits { $0.batchSize = 1_000; $0.inFlight = 64 }, seed: 1)
        #expect(m.wants == TriggerDelivery.maxQueued)
        m.take(index: 1, events: 10)
        #expect(m.wants == TriggerDelivery.maxQueued - 10)
        #expect(TriggerDelivery(limits: TriggerLimits(), seed: 1).wants == 2)
    }

    @Test func theSerializedBodyIsTheCloudEvent() throws {
        let a = TriggerEvent(index: 42, seq: 1, timestamp: 1_795_639_377_123, type: .updated, location: Path(validated: ["rooms", "r\"1", "msgs", "m\n2"]),
                             params: ["room": "r\"1", "msg": "m\n2", "10": "x"], before: try JSON.parse(#"{"b":1,"2":[true,null],"a":"é\u0001"}"#),
                             after: try JSON.parse(#"{"b":2.5}"#), delta: try JSON.parse(#"{"b":2.5,"2":null}"#), authType: "app_user", authID: "u\\1")
        let b = TriggerEvent(index: 43, seq: 0, timestamp: 0, type: .deleted, location: Path(validated: ["x"]), params: [:],
                             before: .string("v"), after: .null, delta: .null, authType: "admin", authID: nil)
        for e in [a, b] {
            let one = TriggerEvent.cloudEventBody([e], namespace: "n s", trigger: "t/1", batch: false)
            #expect(try JSON.parse(String(decoding: one, as: UTF8.self)) == e.cloudEvent(namespace: "n s", trigger: "t/1"))
        }
        let both = TriggerEvent.cloudEventBody([a, b], namespace: "ns", trigger: "t", batch: true)
        #expect(try JSON.parse(String(decoding: both, as: UTF8.self)) == .array([a, b].map { $0.cloudEvent(namespace: "ns", trigger: "t") }))
        // Each event written whole (`writeCloudEvent`) gives the same bytes.
        var whole: [UInt8] = [0x5B]
        a.writeCloudEvent(namespace: "ns", trigger: "t", into: &whole)
        whole.append(0x2C)
        b.writeCloudEvent(namespace: "ns", trigger: "t", into: &whole)
        whole.append(0x5D)
        #expect(whole == both)
        // So do the members shared by a group's triggers, serialized once, behind each trigger's head.
        let members = [a, b].map { e -> [UInt8] in
            var out: [UInt8] = []
            e.writeSharedMembers(namespace: "ns", into: &out)
            return out
        }
        #expect(TriggerEvent.cloudEventBody(head: TriggerEvent.head(namespace: "ns", trigger: "t"), shared: members, batch: true) == both)
        var one: [UInt8] = []
        a.writeCloudEvent(namespace: "ns", trigger: "u", into: &one)
        #expect(TriggerEvent.cloudEventBody(head: TriggerEvent.head(namespace: "ns", trigger: "u"), shared: members, batch: false) == one)
        // What receivers scan for stays byte-exact (compact, no spaces).
        #expect(String(decoding: both, as: UTF8.self).contains(#""sequence":"43","#))
    }

    @Test func timesAreRFC3339() {
        #expect(TriggerEvent.rfc3339(millis: 0) == "1970-01-01T00:00:00.000Z")
        #expect(TriggerEvent.rfc3339(millis: 1_795_639_377_123) == "2026-11-25T20:42:57.123Z")
        #expect(TriggerEvent.rfc3339(millis: 951_782_400_000) == "2000-02-29T00:00:00.000Z")
    }
}
