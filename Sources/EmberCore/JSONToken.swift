extension JSONEventReader {
    /// A primitive as `feed(_:raw:)` reads it: its exact text and what checking it found, with no
    /// value built (`ember import` sends the text as it is: a `String` or `JSON` per value was a
    /// share of its CPU). The text points into the input (or the reader's buffer for a token
    /// split across pieces): valid only during the call it is handed to.
    public struct Token {
        public enum Kind: Sendable, Equatable { case string, number, boolean, null }
        public let kind: Kind
        /// The token's text, a string's with its quotes.
        public let text: UnsafeBufferPointer<UInt8>
        /// A string with escapes, decoded by the reader's check; nil for a string whose content
        /// is its text between the quotes (then valid UTF-8, no escapes, no control characters).
        public let decoded: String?
        /// A string's content in UTF-8 bytes (decoded); 0 for other kinds.
        public let contentBytes: Int

        /// A string's bytes between its quotes (its content when `decoded` is nil).
        public var content: UnsafeBufferPointer<UInt8> {
            precondition(kind == .string, "only a string has content")
            return UnsafeBufferPointer(rebasing: text[1..<(text.count - 1)])
        }

        public var isNull: Bool { kind == .null }

        /// A string's value (a key's, as the parser builds it).
        public func string() -> String {
            precondition(kind == .string, "not a string")
            return decoded ?? String(decoding: content, as: UTF8.self)
        }

        /// The value `JSON.parse` builds from the text.
        public func json() throws(EmberError) -> JSON {
            switch kind {
            case .null: return .null
            case .boolean: return .bool(text.first == UInt8(ascii: "t"))
            case .string: return .string(string())
            case .number:
                var p = JSONParser(bytes: Array(text), maxDepth: 1)
                return try p.parseNumber()
            }
        }
    }

    /// An event of `feed(_:raw:)`: a primitive comes as its `Token`.
    public enum RawEvent {
        case beginObject, endObject, beginArray, endArray
        /// An object member's key (a string token); its value's events follow.
        case key(Token)
        case value(Token)
    }

    /// A raw event with the bytes it spans in the input (as `SpanEmit`).
    public typealias RawEmit = (_ event: RawEvent, _ start: Int64, _ end: Int64) throws -> Void
}
