import EmberCore
import EmberTestSupport
import Testing

@testable import EmberProtocol

@Suite(.printsSeedOnFailure) struct RestRequestTests {
    /// `simpleDataTarget` (the fast paths' one-pass reading) takes the common write targets and
    /// gives exactly what `parse` gives; anything else it leaves to `parse`.
    @Test func simpleTargetsReadInOnePassEqualTheFullParse() throws {
        let taken = ["/a.json", "/a/b.json", "/bench/w3/k0042.json?print=silent", "/a//b/.json?print=pretty",
                     "/A-b_9/c.json", "/x/y/z/.json"]
        for uri in taken {
            let simple = try #require(RestRequest.simpleDataTarget(uri), "\(uri)")
            #expect(simple == (try RestRequest.parse(uri: uri)), "\(uri)")
            #expect(RestRequest.plainDataWrite(uri: uri) == simple)
        }
        let left = ["/.json", "/a.json?print=silent&x=1", "/a.json?print=loud", "/a.json?", "/a%20b.json", "/a.b.json",
                    "/.settings/rules.json", "/a/.priority.json", "/.ember/status", "/a", "a/b.json", "/é.json",
                    "/a.json?ns=foo", "/a$.json", "/" + String(repeating: "k/", count: 40) + ".json",
                    "/" + String(repeating: "k", count: 769) + ".json"]
        for uri in left { #expect(RestRequest.simpleDataTarget(uri) == nil, "\(uri)") }
        // Seeded targets over an alphabet with every byte class the grammar cares about.
        var rng = TestSeed.generator(0x5eed)
        func next() -> UInt64 { rng.next() }
        let pieces = ["a", "Z", "0", "-", "_", "/", ".", "%20", "%2F", "?", "=", "&", "print=silent", "print=pretty",
                      ".json", "$", "é", " ", "\u{7f}", "ns=x"]
        var simpleCount = 0
        for _ in 0..<20_000 {
            var uri = "/"
            for _ in 0..<Int(next() % 8) { uri += pieces[Int(next() % UInt64(pieces.count))] }
            if next() % 2 == 0 { uri += ".json" }
            if next() % 3 == 0 { uri += "?print=silent" }
            let full = try? RestRequest.parse(uri: uri)
            if let simple = RestRequest.simpleDataTarget(uri) {
                simpleCount += 1
                #expect(simple == full, "\(uri)")
            }
            // The fast paths' answer is the same with or without the one-pass reading.
            let slow: RestRequest? = full.flatMap { r in
                if case .data = r.target, !r.shallow, r.query == nil, !r.export, r.methodOverride == nil { return r }
                return nil
            }
            #expect(RestRequest.plainDataWrite(uri: uri) == slow, "\(uri)")
        }
        #expect(simpleCount > 300, "the generator reaches the one-pass reading")
    }

    @Test func pathsAndTrailingSlashes() throws {
        #expect(try RestRequest.parse(uri: "/.json").target == .data(.root))
        #expect(try RestRequest.parse(uri: "/a/b.json").target == .data(Path("a/b")))
        #expect(try RestRequest.parse(uri: "/a/b/.json").target == .data(Path("a/b")))
        #expect(try RestRequest.parse(uri: "/t/a%20b.json").target == .data(Path(validated: ["t", "a b"])))
        #expect(try RestRequest.parse(uri: "/t/a+b.json").target == .data(Path(validated: ["t", "a+b"])))
        #expect(try RestRequest.parse(uri: "/t/%C3%A9%E2%98%83.json").target == .data(Path(validated: ["t", "é☃"])))
        #expect(try RestRequest.parse(uri: "/t/100%25.json").target == .data(Path(validated: ["t", "100%"])))
        #expect(try RestRequest.parse(uri: "/u/.priority.json").target == .priority(Path("u")))
        #expect(try RestRequest.parse(uri: "/.settings/rules.json").target == .rules)
    }

    @Test func invalidPathsAreRefused() {
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/a") }
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/a%2Eb.json") }
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/a$b.json") }
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/%ZZ.json") }
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/" + Array(repeating: "k", count: 33).joined(separator: "/") + ".json") }
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/" + String(repeating: "k", count: 769) + ".json") }
    }

    @Test func pythonQueryStrings() throws {
        // Shapes firebase-admin 7.7.0 sends (reference §5.4).
        let r = try RestRequest.parse(uri: "/dinos.json?endAt=%22pterodactyl%22&limitToFirst=2&orderBy=%22height%22&startAt=3&ns=my-proj")
        #expect(r.namespace == "my-proj")
        let q = try #require(r.query)
        #expect(q.index == .child(try Path("height")))
        #expect(q.start == QueryBound(value: .number(3)))
        #expect(q.end == QueryBound(value: .string("pterodactyl")))
        #expect(q.limit == 2 && q.limitFromStart)
        let k = try RestRequest.parse(uri: "/d.json?equalTo=%22x%22&orderBy=%22$key%22&ns=n")
        #expect(k.query?.index == .key)
        #expect(k.query?.start?.value == .string("x"))
        let v = try RestRequest.parse(uri: "/d.json?limitToLast=3&orderBy=%22$value%22&startAt=true&ns=n")
        #expect(v.query?.limitFromStart == false && v.query?.limit == 3)
        let o = try RestRequest.parse(uri: "/x.json?ns=o&auth_variable_override=%7B%22uid%22:%22u1%22,%22admin%22:false%7D")
        #expect(o.authOverride == .some(.object(["uid": .string("u1"), "admin": .bool(false)])))
        let n = try RestRequest.parse(uri: "/y.json?ns=third&auth_variable_override=null")
        #expect(n.authOverride == .some(nil))
        let plus = try RestRequest.parse(uri: "/d.json?orderBy=%22$key%22&startAt=%22a+b%22")
        #expect(plus.query?.start?.value == .string("a+b"))
    }

    @Test func boundsWithKeyTieBreak() throws {
        let r = try RestRequest.parse(uri: "/d.json?orderBy=%22h%22&startAt=3,%22k%22&endBefore=%22z%22")
        #expect(r.query?.start == QueryBound(value: .number(3), name: "k"))
        #expect(r.query?.end == QueryBound(value: .string("z"), name: KeyOrder.minName, inclusive: false))
    }

    @Test func queryErrorsUseFirebaseTexts() {
        func message(_ uri: String) -> String? {
            do { _ = try RestRequest.parse(uri: uri); return nil } catch { return error.message }
        }
        #expect(message("/d.json?orderBy=height") == "orderBy must be a valid JSON encoded path")
        #expect(message("/d.json?orderBy=%22h%22&equalTo=%7B%22z%22:1%7D") == "Constraint index field must be a JSON primitive")
        #expect(message("/d.json?limitToFirst=1") == "orderBy must be defined when other query parameters are defined")
        #expect(message("/d.json?orderBy=%22h%22&limitToFirst=1&limitToLast=1") != nil)
        #expect(message("/d.json?orderBy=%22h%22&limitToFirst=-1") != nil)
        #expect(message("/d.json?orderBy=%22h%22&equalTo=1&startAt=0") == "equalTo cannot be specified in addition to startAt or endAt")
        #expect(message("/d.json?shallow=true&orderBy=%22$key%22") == "The request mixes query parameters with a shallow GET request")
        #expect(message("/d.json?bogus=1") != nil)
        #expect(message("/d.json?orderBy=%22a%22&orderBy=%22b%22") != nil)
    }

    @Test func timeouts() throws {
        #expect(try RestRequest.parse(uri: "/a.json?timeout=3ms").timeoutMillis == 3)
        #expect(try RestRequest.parse(uri: "/a.json?timeout=10s").timeoutMillis == 10_000)
        #expect(try RestRequest.parse(uri: "/a.json?timeout=15min").timeoutMillis == 900_000)
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/a.json?timeout=16min") }
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/a.json?timeout=0s") }
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/a.json?timeout=abc") }
    }

    @Test func shallowWithLimitToFirstIsKeyOrder() throws {
        let r = try RestRequest.parse(uri: "/a.json?shallow=true&limitToFirst=1")
        #expect(r.shallow)
        #expect(r.query == QuerySpec(index: .key).limited(toFirst: 1))
    }

    /// A repeated parameter is refused (except `ns`), in short queries and in long ones alike.
    @Test func repeatedParametersAreRefused() throws {
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/a.json?print=silent&print=pretty") }
        #expect(try RestRequest.parse(uri: "/a.json?ns=x&ns=y").namespace == "y")
        let filler = (0..<10).map { _ in "disableTriggers=1" }
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/a.json?" + (["print=silent"] + filler).joined(separator: "&")) }
        let distinct = ["print=silent", "shallow=true", "timeout=1s", "download=1", "callback=c", "ac=1", "writeSizeLimit=tiny",
                        "consistency=local", "auth=t", "ns=n1", "ns=n2"]
        let long = try RestRequest.parse(uri: "/a.json?" + distinct.joined(separator: "&"))
        #expect(long.print == .silent && long.shallow && long.namespace == "n2" && long.timeoutMillis == 1000)
        #expect(try RestRequest.parse(uri: "/healthz").target == .node("healthz"))
        #expect(throws: RestError.self) { try RestRequest.parse(uri: "/.settings/other.json") }
    }

    @Test func errorBodyFormat() {
        #expect(RestError(401, "Permission denied").body == "{\n  \"error\" : \"Permission denied\"\n}\n")
    }
}
