/// Walks a JSON document's outer objects member by member, without building their dictionaries.
/// For hot envelopes (a wire request's `{"t":…,"d":{"r":…,"a":…,"b":…}}`) whose few known keys are
/// read once: the two outer dictionaries, their hashing and their lookups were a visible share of
/// a pipelined write's CPU. Same grammar, limits and refusals as `JSON.parse` (it shares the
/// parser): a document the walk accepts is one `JSON.parse` accepts, and the values it hands out
/// are the ones `JSON.parse` would have put in those objects.
public struct JSONMembers {
    var parser: JSONParser
    /// Objects entered and not yet closed (the parser's depth for values read inside them).
    var depth = 0
    /// Whether the current object's last member (or an object just closed) needs a `,` or `}` next.
    var afterValue = false

    public init(_ text: String, maxDepth: Int = Limits.maxJSONDepth) {
        parser = JSONParser(bytes: Array(text.utf8), maxDepth: maxDepth)
        parser.skipWhitespace()
    }

    /// Whether the next value is an object; if so, enters it (its members follow with `nextKey`).
    /// Otherwise nothing is consumed: read the value with `value()`.
    public mutating func enterObject() throws(EmberError) -> Bool {
        guard parser.i < parser.bytes.count, parser.bytes[parser.i] == UInt8(ascii: "{") else { return false }
        depth += 1
        guard depth <= parser.maxDepth else { throw parser.fail("nesting too deep") }
        parser.i += 1
        afterValue = false
        return true
    }

    /// The next member's key of the object entered last, positioned at its value; nil when the
    /// object closes (consumed, back in the enclosing object).
    public mutating func nextKey() throws(EmberError) -> String? {
        precondition(depth > 0, "nextKey outside an object")
        parser.skipWhitespace()
        guard parser.i < parser.bytes.count else { throw parser.fail("unexpected end") }
        let c = parser.bytes[parser.i]
        if c == UInt8(ascii: "}") {
            parser.i += 1
            depth -= 1
            afterValue = true  // the closed object was a value of the enclosing one
            return nil
        }
        if afterValue {
            guard c == UInt8(ascii: ",") else { throw parser.fail("expected ',' or '}'") }
            parser.i += 1
            parser.skipWhitespace()
        }
        guard parser.i < parser.bytes.count, parser.bytes[parser.i] == UInt8(ascii: "\"") else { throw parser.fail("expected key") }
        let key = try parser.parseString()
        parser.skipWhitespace()
        guard parser.i < parser.bytes.count, parser.bytes[parser.i] == UInt8(ascii: ":") else { throw parser.fail("expected ':'") }
        parser.i += 1
        parser.skipWhitespace()
        afterValue = false
        return key
    }

    /// The value at the cursor, whole (as `JSON.parse` builds it).
    public mutating func value() throws(EmberError) -> JSON {
        let v = try parser.parseValue(depth: depth)
        afterValue = true
        return v
    }

    /// Checks that nothing but whitespace follows the outermost value.
    public mutating func finish() throws(EmberError) {
        precondition(depth == 0, "finish inside an object")
        parser.skipWhitespace()
        guard parser.i == parser.bytes.count else { throw parser.fail("trailing characters") }
    }
}
