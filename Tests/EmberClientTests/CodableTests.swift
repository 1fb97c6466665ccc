import EmberCore
import Foundation
import Testing
@testable import EmberClient

/// `Database.Encoder` / `Database.Decoder`, `setValue(from:)`, `data(as:)` and `@ServerTimestamp`:
/// encoder output shapes, strategies, and round trips through a real emberd.
@Suite(.timeLimit(.minutes(1))) struct CodableTests {
    struct Address: Codable, Equatable {
        var street: String
        var zip: Int
    }

    struct Person: Codable, Equatable {
        var name: String
        var age: Int
        var height: Double
        var nickname: String?
        var address: Address
        var previous: [Address]
        var tags: [String]
        var scores: [String: Int]
        var born: Date
        var avatar: Data
        var active: Bool
    }

    static let alice = Person(
        name: "Alice", age: 41, height: 1.68, nickname: nil,
        address: Address(street: "1 Main St", zip: 12345),
        previous: [Address(street: "Old Rd", zip: 1), Address(street: "Older Ln", zip: 2)],
        tags: ["a", "b", "c"], scores: ["math": 9, "art": 7],
        born: Date(timeIntervalSince1970: 1_000_000_000.5), avatar: Data([0, 1, 2, 254, 255]), active: true)

    // MARK: - Encoder output

    @Test func encoderProducesTheSDKsShapesWithDefaultStrategies() throws {
        let out = try Database.Encoder().encode(Self.alice)
        let dict = try #require(out as? [String: Any])
        #expect(dict["name"] as? String == "Alice")
        #expect(dict["age"] as? Int == 41)
        #expect(dict["active"] as? Bool == true)
        #expect(dict["nickname"] == nil, "nil optionals are omitted")
        #expect((dict["address"] as? [String: Any])?["zip"] as? Int == 12345)
        #expect(dict["tags"] as? [String] == ["a", "b", "c"])
        #expect((dict["previous"] as? [Any])?.count == 2)
        // The SDK's defaults: Date's own encoding (seconds since 2001) and Base64 data.
        #expect(dict["born"] as? Double == Self.alice.born.timeIntervalSinceReferenceDate)
        #expect(dict["avatar"] as? String == Data([0, 1, 2, 254, 255]).base64EncodedString())
    }

    @Test func roundTripsNestedStructsOptionalsDatesAndArraysWithoutAServer() throws {
        var bob = Self.alice
        bob.nickname = "Bobby"
        for person in [Self.alice, bob] {
            let json = try Database.Encoder().encodeJSON(person)
            #expect(try Database.Decoder().decode(Person.self, fromJSON: json) == person)
            // Through the `Any` shapes too (what `snapshot.value` gives).
            #expect(try Database.Decoder().decode(Person.self, from: try Database.Encoder().encode(person)) == person)
        }
    }

    @Test func dateStrategies() throws {
        struct D: Codable, Equatable { var at: Date }
        let d = D(at: Date(timeIntervalSince1970: 1_700_000_000))
        let cases: [(DatabaseEncoder.DateEncodingStrategy, DatabaseDecoder.DateDecodingStrategy, JSON)] = [
            (.secondsSince1970, .secondsSince1970, .double(1_700_000_000)),
            (.millisecondsSince1970, .millisecondsSince1970, .double(1_700_000_000_000)),
            (.iso8601, .iso8601, .string("2023-11-14T22:13:20Z")),
            (.deferredToDate, .deferredToDate, .double(1_700_000_000 - 978_307_200)),
        ]
        for (enc, dec, stored) in cases {
            let encoder = Database.Encoder()
            encoder.dateEncodingStrategy = enc
            let decoder = Database.Decoder()
            decoder.dateDecodingStrategy = dec
            let json = try encoder.encodeJSON(d)
            #expect(json["at"] == stored)
            #expect(try decoder.decode(D.self, fromJSON: json) == d)
        }
        let custom = Database.Encoder()
        custom.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode("day \(Int(date.timeIntervalSince1970) / 86400)")
        }
        #expect(try custom.encodeJSON(d)["at"] == .string("day 19675"))
    }

    @Test func keyStrategiesConvertPropertyNamesButNotDictionaryKeys() throws {
        struct Profile: Codable, Equatable {
            var firstName: String
            var homeURLPath: String
            var extraData: [String: String]
        }
        let p = Profile(firstName: "Ann", homeURLPath: "/ann", extraData: ["someKey": "v"])
        let encoder = Database.Encoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let json = try encoder.encodeJSON(p)
        #expect(json == .object(["first_name": .string("Ann"), "home_url_path": .string("/ann"),
                                 "extra_data": .object(["someKey": .string("v")])]))
        let decoder = Database.Decoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        // `home_url_path` reads back as `homeUrlPath` (as with JSONDecoder), so use a type without acronyms.
        struct Plain: Codable, Equatable { var firstName: String; var extraData: [String: String] }
        #expect(try decoder.decode(Plain.self, fromJSON: json) == Plain(firstName: "Ann", extraData: ["someKey": "v"]))
        #expect(KeyCase.snake("oneTwoThree") == "one_two_three")
        #expect(KeyCase.snake("myURLValue") == "my_url_value")
        #expect(KeyCase.snake("value2Go") == "value2_go")
        #expect(KeyCase.camel(fromSnake: "_one_two_") == "_oneTwo_")
        #expect(KeyCase.camel(fromSnake: "plain") == "plain")

        let upper = Database.Encoder()
        upper.keyEncodingStrategy = .custom { path in AnyCodingKey(stringValue: path.last!.stringValue.uppercased()) }
        #expect(try upper.encodeJSON(Plain(firstName: "x", extraData: [:]))["FIRSTNAME"] == .string("x"))
    }

    @Test func nonConformingFloatsThrowByDefaultOrBecomeStrings() throws {
        struct F: Codable { var x: Double }
        #expect(throws: EncodingError.self) { try Database.Encoder().encodeJSON(F(x: .infinity)) }
        let encoder = Database.Encoder()
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "+inf", negativeInfinity: "-inf", nan: "nan")
        let json = try encoder.encodeJSON(F(x: -.infinity))
        #expect(json["x"] == .string("-inf"))
        let decoder = Database.Decoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "+inf", negativeInfinity: "-inf", nan: "nan")
        #expect(try decoder.decode(F.self, fromJSON: json).x == -.infinity)
        #expect(throws: DecodingError.self) { try Database.Decoder().decode(F.self, fromJSON: json) }
    }

    @Test func userInfoReachesEncodeAndDecode() throws {
        let key = CodingUserInfoKey(rawValue: "unit")!
        struct Length: Codable, Equatable {
            var meters: Double
            func encode(to encoder: any Encoder) throws {
                var c = encoder.singleValueContainer()
                try c.encode(encoder.userInfo[CodingUserInfoKey(rawValue: "unit")!] as? String == "cm" ? meters * 100 : meters)
            }
            init(meters: Double) { self.meters = meters }
            init(from decoder: any Decoder) throws {
                let v = try decoder.singleValueContainer().decode(Double.self)
                meters = decoder.userInfo[CodingUserInfoKey(rawValue: "unit")!] as? String == "cm" ? v / 100 : v
            }
        }
        let encoder = Database.Encoder()
        encoder.userInfo[key] = "cm"
        #expect(try encoder.encodeJSON(Length(meters: 2)) == .double(200))
        let decoder = Database.Decoder()
        decoder.userInfo[key] = "cm"
        #expect(try decoder.decode(Length.self, fromJSON: .int(150)) == Length(meters: 1.5))
    }

    @Test func decodingErrorsAndTheDatabasesMissingValues() throws {
        struct Post: Codable, Equatable { var title: String; var likes: [String]; var meta: [String: Int]; var note: String? }
        let decoder = Database.Decoder()
        // No data: valueNotFound, unless the type is optional.
        #expect(throws: DecodingError.self) { try decoder.decode(Post.self, fromJSON: .null) }
        #expect(try decoder.decode(Post?.self, fromJSON: .null) == nil)
        // Empty collections cannot be stored: absent reads as empty.
        #expect(try decoder.decode(Post.self, fromJSON: .object(["title": .string("t")])) == Post(title: "t", likes: [], meta: [:], note: nil))
        // A required field that is missing is keyNotFound.
        do {
            _ = try decoder.decode(Post.self, fromJSON: .object(["likes": .array([.string("x")])]))
            Issue.record("decoded without a title")
        } catch DecodingError.keyNotFound(let key, _) {
            #expect(key.stringValue == "title")
        }
        #expect(throws: DecodingError.self) { try decoder.decode(Post.self, fromJSON: .object(["title": .int(3)])) }
        // Integer-keyed objects and arrays are interchangeable (Firebase arrays).
        #expect(try decoder.decode([Int].self, fromJSON: .object(["0": .int(5), "2": .int(7)])) == [5, 7])
        #expect(try decoder.decode([Int: String].self, fromJSON: .array([.string("a"), .string("b")])) == [0: "a", 1: "b"])
        #expect(try decoder.decode(Int.self, fromJSON: .double(3)) == 3)
        #expect(throws: DecodingError.self) { try decoder.decode(Int8.self, fromJSON: .int(300)) }
    }

    // MARK: - Through the server

    @Test func setValueFromAndDataAsRoundTripThroughTheServer() async throws {
        let t = try await TestNamespace.make()
        let writer = t.client(), reader = t.client()
        defer { writer.shutdown(); reader.shutdown() }
        let acked = Recorder()
        try writer.reference(withPath: "people/alice").setValue(from: Self.alice) { error in acked.add("acked \(error == nil)") }
        await acked.wait { $0 == ["acked true"] }
        // Stored as plain database data: arrays as integer keys, no nil fields.
        let stored = try await t.server.restGet("people/alice", ns: t.ns)
        #expect(stored["nickname"] == nil)
        #expect(stored["tags"] == .array([.string("a"), .string("b"), .string("c")]))
        #expect(stored["address"]?["street"] == .string("1 Main St"))
        let snap = try await reader.reference(withPath: "people/alice").getData()
        #expect(try snap.data(as: Person.self) == Self.alice)
        #expect(try snap.childSnapshot(forPath: "previous").data(as: [Address].self) == Self.alice.previous)
        let missing = try await reader.reference(withPath: "people/nobody").getData()
        #expect(try missing.data(as: Person?.self) == nil)
        #expect(throws: DecodingError.self) { try missing.data(as: Person.self) }
    }

    @Test func encodingErrorsAreThrownBeforeAnythingIsWritten() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        struct Bad: Codable { var x: Double }
        #expect(throws: EncodingError.self) { try db.reference(withPath: "bad").setValue(from: Bad(x: .nan)) }
        #expect(try await db.reference(withPath: "bad").getData().exists() == false)
    }

    struct Message: Codable, Equatable {
        var text: String
        @ServerTimestamp var sentAt: Date?
    }

    @Test func serverTimestampIsFilledByTheServer() async throws {
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "messages/m1")
        let local = Recorder()
        ref.observe(.value) { s in
            if let m = try? s.data(as: Message?.self) { local.add(m.sentAt == nil ? "no time" : "time") }
        }
        let before = Date()
        let acked = Recorder()
        try ref.setValue(from: Message(text: "hi", sentAt: nil)) { error in acked.add("acked \(error == nil)") }
        await acked.wait { $0 == ["acked true"] }
        // The local event already had the client's estimate.
        #expect(local.all.contains("time") && !local.all.contains("no time"))
        let stored = try await t.server.restGet("messages/m1", ns: t.ns)
        guard case .int(let ms) = stored["sentAt"] else {
            Issue.record("sentAt stored as \(String(describing: stored["sentAt"]))")
            return
        }
        #expect(abs(Double(ms) / 1000 - before.timeIntervalSince1970) < 60)
        let read = try await db.reference(withPath: "messages/m1").getData().data(as: Message.self)
        #expect(read.text == "hi")
        #expect(read.sentAt.map { abs($0.timeIntervalSince1970 * 1000 - Double(ms)) < 1 } == true)
        // A set date is stored as milliseconds; a missing field reads as nil.
        let fixed = Message(text: "x", sentAt: Date(timeIntervalSince1970: 1_700_000_000.123))
        #expect(try Database.Encoder().encodeJSON(fixed)["sentAt"] == .int(1_700_000_000_123))
        #expect(try Database.Decoder().decode(Message.self, fromJSON: try Database.Encoder().encodeJSON(fixed)) == fixed)
        #expect(try Database.Decoder().decode(Message.self, fromJSON: .object(["text": .string("t")])).sentAt == nil)
    }

    @Test func mutableDataDecodesAndEncodesInATransaction() async throws {
        struct Counter: Codable, Equatable { var count: Int; var history: [Int] }
        let t = try await TestNamespace.make()
        let db = t.client()
        defer { db.shutdown() }
        let ref = db.reference(withPath: "counter")
        try ref.setValue(from: Counter(count: 1, history: [1]))
        let (committed, snap) = try await ref.runTransactionBlock { data in
            guard var c = try? data.data(as: Counter.self) else { return .success(withValue: data) }
            c.count += 1
            c.history.append(c.count)
            try? data.setValue(from: c)
            return .success(withValue: data)
        }
        #expect(committed)
        #expect(try snap.data(as: Counter.self) == Counter(count: 2, history: [1, 2]))
        #expect(try await t.server.restGet("counter", ns: t.ns) == .object(["count": .int(2), "history": .array([.int(1), .int(2)])]))
    }
}
