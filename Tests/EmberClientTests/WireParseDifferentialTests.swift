import EmberCore
import EmberProtocol
import Testing
import EmberTestSupport

/// `WireClientMessage.parse` walks the envelope member by member (`JSONMembers`) instead of
/// building the whole document; its answers must be the ones reading the parsed document gives.
@Suite(.printsSeedOnFailure) struct WireParseDifferentialTests {
    /// The reading `parse` replaced: the whole document through `JSON.parse`, then its keys.
    static func reference(_ text: String) -> Result<WireClientMessage, WireClientMessage.ParseError> {
        guard let json = try? JSON.parse(text), case .object(let envelope) = json,
              case .object(let d)? = envelope["d"] else { return .failure(.notProtocol) }
        if envelope["t"]?.stringValue == "c" {
            return .success(d["t"]?.stringValue == "p" ? .ping : .ignored)
        }
        guard case .int(let r)? = d["r"], let action = d["a"]?.stringValue else { return .failure(.missingRequestFields) }
        return .success(.request(r: r, action: action, body: d["b"]?.objectValue ?? [:]))
    }

    static let values = [#""v""#, "1", "-2.5", "true", "null", "[1,{\"x\":[]}]", #"{"k":{"j":"w"}}"#, "{}", #""\u00e9\n""#, "12345678901234567890"]
    static let keys = [#""t""#, #""d""#, #""r""#, #""a""#, #""b""#, #""p""#, #""\u0074""#, #""x""#]

    /// A request-shaped message with its members shuffled, sometimes repeated, with extra
    /// members, whitespace and escaped keys.
    static func message(_ g: inout SplitMix64) -> String {
        func ws() -> String { ["", " ", "\n\t", "  "].randomElement(using: &g)! }
        func member(_ k: String, _ v: String) -> String { ws() + k + ws() + ":" + ws() + v + ws() }
        func object(_ members: [String]) -> String { "{" + members.shuffled(using: &g).joined(separator: ",") + "}" }
        var inner = [member(#""r""#, ["1", "42", "-3", "1.5", #""7""#, "9223372036854775807"].randomElement(using: &g)!),
                     member(#""a""#, [#""p""#, #""m""#, "3", #""auth""#].randomElement(using: &g)!)]
        let body = object([member(#""p""#, #""/a/b""#), member(#""d""#, values.randomElement(using: &g)!)])
        inner.append(member(#""b""#, Int.random(in: 0..<6, using: &g) == 0 ? values.randomElement(using: &g)! : body))
        if Bool.random(using: &g) { inner.append(member(keys.randomElement(using: &g)!, values.randomElement(using: &g)!)) }
        if Int.random(in: 0..<4, using: &g) == 0 { inner.append(member(#""t""#, [#""p""#, #""n""#].randomElement(using: &g)!)) }
        var outer = [member(#""t""#, [#""d""#, #""c""#, "1", #""\u0063""#].randomElement(using: &g)!),
                     member(Int.random(in: 0..<8, using: &g) == 0 ? #""\u0064""# : #""d""#,
                            Int.random(in: 0..<8, using: &g) == 0 ? values.randomElement(using: &g)! : object(inner))]
        if Bool.random(using: &g) { outer.append(member(keys.randomElement(using: &g)!, values.randomElement(using: &g)!)) }
        return ws() + object(outer) + ws()
    }

    /// One random edit: a byte dropped, a structural byte put in, or the text cut short.
    static func mutate(_ text: String, _ g: inout SplitMix64) -> String {
        var b = Array(text.utf8)
        guard !b.isEmpty else { return text }
        let at = Int.random(in: 0..<b.count, using: &g)
        switch Int.random(in: 0..<3, using: &g) {
        case 0: b.remove(at: at)
        case 1: b.insert(Array("{}[]\",:\\ 0-e".utf8).randomElement(using: &g)!, at: at)
        default: b.removeSubrange(at...)
        }
        return String(decoding: b, as: UTF8.self)
    }

    @Test func answersAsReadingTheWholeDocumentDoes() {
        var g = TestSeed.generator(0x5EED_0012)
        var outcomes: [String: Int] = [:]
        for _ in 0..<20_000 {
            var text = Self.message(&g)
            for _ in 0..<Int.random(in: 0..<3, using: &g) { text = Self.mutate(text, &g) }
            let got = WireClientMessage.parse(text), want = Self.reference(text)
            #expect(got == want, "\(text)")
            switch got {
            case .success(.request): outcomes["request", default: 0] += 1
            case .success(.ping): outcomes["ping", default: 0] += 1
            case .success: outcomes["ignored", default: 0] += 1
            case .failure(let e): outcomes["\(e)", default: 0] += 1
            }
        }
        // The generator reaches every answer (so the comparison covers each branch).
        for kind in ["request", "ping", "ignored", "notProtocol", "missingRequestFields"] {
            #expect(outcomes[kind, default: 0] > 100, "\(kind): \(outcomes)")
        }
    }

    @Test func repeatedKeysKeepTheirLastValue() throws {
        let text = #"{"d":5,"t":"d","d":{"r":1,"a":"x","r":2,"b":{"p":"a"},"a":"p"}}"#
        #expect(try WireClientMessage.parse(text).get() == .request(r: 2, action: "p", body: ["p": .string("a")]))
        #expect(WireClientMessage.parse(#"{"t":"d","d":{"r":1,"a":"p"},"d":[]}"#) == .failure(.notProtocol))
    }

    @Test func nestingBeyondTheLimitIsRefusedAsByTheParser() {
        let deep = String(repeating: "[", count: Limits.maxJSONDepth) + String(repeating: "]", count: Limits.maxJSONDepth)
        let text = #"{"t":"d","d":{"r":1,"a":"p","b":{"d":"# + deep + "}}}"
        #expect(WireClientMessage.parse(text) == Self.reference(text))
        #expect(WireClientMessage.parse(text) == .failure(.notProtocol))
    }
}
