/// An incremental JSON reader: bytes go in as they arrive (`feed`, any split), events come out
/// (`Event`), and memory holds the open containers' kinds and one token (a string is bounded by
/// `maxStringBytes`), never the document. Accepts exactly what `JSON.parse` accepts (strings and
/// numbers are decoded by the same parser), with the byte offset of the first error
/// (`JSONEventReader.Failure`). Pure: `ember import` reads multi-gigabyte files through it.
public struct JSONEventReader: Sendable {
    public enum Event: Sendable, Equatable {
        case beginObject, endObject, beginArray, endArray
        /// An object member's key; its value's events follow.
        case key(String)
        /// A primitive: null, a boolean, a number or a string.
        case value(JSON)
    }

    /// Malformed input: the reason and the byte offset (from the start of the input) where it
    /// was found.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var offset: Int64
        public var reason: String
        public var description: String { "\(reason) at byte \(offset)" }
        public init(offset: Int64, reason: String) {
            self.offset = offset
            self.reason = reason
        }
    }

    public let maxDepth: Int
    /// The most bytes of one string as written (escapes included).
    public let maxStringBytes: Int
    /// Bytes consumed so far.
    public private(set) var offset: Int64 = 0
    /// Open containers, innermost last (true: an array).
    private var stack: [Bool] = []
    private enum Expect { case value, valueOrEnd, key, keyOrEnd, colon, commaOrEnd, done }
    private var expect = Expect.value
    private enum Token { case none, string, number, literal }
    private var token = Token.none
    private var tokenBytes: [UInt8] = []
    private var tokenStart: Int64 = 0
    /// Inside a string token: the previous byte was an unpaired backslash.
    private var escaped = false

    public init(maxDepth: Int = Limits.maxJSONDepth, maxStringBytes: Int = 4 * Limits.maxStringBytes) {
        self.maxDepth = maxDepth
        self.maxStringBytes = maxStringBytes
    }

    /// Open containers now.
    public var depth: Int { stack.count }
    /// Where the token being read began (a string, number or literal split across `feed`s);
    /// nil between tokens. The bytes from here on are still to come as an event.
    public var openTokenStart: Int64? { token == .none ? nil : tokenStart }
    /// True once a whole document was read (only whitespace may follow).
    public var isComplete: Bool { expect == .done && token == .none }

    /// An event with the bytes it spans in the input: `start` is where its token (or bracket)
    /// begins, `end` the offset just past it. A primitive value's span is its exact text.
    public typealias SpanEmit = (_ event: Event, _ start: Int64, _ end: Int64) throws -> Void

    /// Reads `bytes`, calling `emit` for each event in order with the offset just past it. After
    /// a failure the reader must not be fed again.
    public mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, _ emit: (Event, Int64) throws -> Void) throws {
        try feed(bytes, spans: { e, _, end in try emit(e, end) })
    }

    /// `feed` with each event's span (`SpanEmit`): `ember import` sends a value's text as it is
    /// in the file instead of building and serializing it again.
    public mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, spans emit: SpanEmit) throws {
        var i = 0
        let n = bytes.count
        while i < n {
            let c = bytes[i]
            switch token {
            case .string:
                // Copy the run up to the next quote or backslash at once.
                var j = i
                if !escaped {
                    while j < n, bytes[j] != 0x22, bytes[j] != 0x5C { j += 1 }
                    if j > i { tokenBytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[i..<j])) }
                    try checkStringLength()
                    if j == n { offset += Int64(n - i); i = n; continue }
                }
                let b = bytes[j]
                if escaped {
                    escaped = false
                    tokenBytes.append(b)
                } else if b == 0x5C {
                    escaped = true
                    tokenBytes.append(b)
                } else {  // the closing quote
                    offset += Int64(j + 1 - i)
                    i = j + 1
                    try endString(emit)
                    continue
                }
                offset += Int64(j + 1 - i)
                i = j + 1
                continue
            case .number:
                if Self.isNumberByte(c) {
                    tokenBytes.append(c)
                    i += 1
                    offset += 1
                    try checkStringLength()
                    continue
                }
                try endNumber(emit)
            case .literal:
                if c >= 0x61 && c <= 0x7A {
                    tokenBytes.append(c)
                    i += 1
                    offset += 1
                    if tokenBytes.count > 5 { throw fail("bad literal", at: tokenStart) }
                    continue
                }
                try endLiteral(emit)
            case .none: break
            }
            // Between tokens.
            switch c {
            case 0x20, 0x09, 0x0A, 0x0D:
                break
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard expect == .value || expect == .valueOrEnd else { throw fail("unexpected character") }
                guard stack.count < maxDepth else { throw fail("nesting too deep") }
                let isArray = c == UInt8(ascii: "[")
                stack.append(isArray)
                expect = isArray ? .valueOrEnd : .keyOrEnd
                try emit(isArray ? .beginArray : .beginObject, offset, offset + 1)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                let isArray = c == UInt8(ascii: "]")
                guard let top = stack.last, top == isArray,
                      expect == .commaOrEnd || expect == (isArray ? .valueOrEnd : .keyOrEnd) else {
                    throw fail("unexpected character")
                }
                stack.removeLast()
                afterValue()
                try emit(isArray ? .endArray : .endObject, offset, offset + 1)
            case UInt8(ascii: ","):
                guard expect == .commaOrEnd, let top = stack.last else { throw fail("unexpected character") }
                expect = top ? .value : .key
            case UInt8(ascii: ":"):
                guard expect == .colon else { throw fail("unexpected character") }
                expect = .value
            case UInt8(ascii: "\""):
                guard expect == .value || expect == .valueOrEnd || expect == .key || expect == .keyOrEnd else {
                    throw fail("unexpected character")
                }
                startToken(.string)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard expect == .value || expect == .valueOrEnd else { throw fail("unexpected character") }
                startToken(.number)
                tokenBytes.append(c)
            case UInt8(ascii: "a")...UInt8(ascii: "z"):
                guard expect == .value || expect == .valueOrEnd else { throw fail("unexpected character") }
                startToken(.literal)
                tokenBytes.append(c)
            default:
                throw fail("unexpected character")
            }
            i += 1
            offset += 1
        }
    }

    /// Convenience for tests and small inputs.
    public mutating func feed(_ bytes: [UInt8], _ emit: (Event, Int64) throws -> Void) throws {
        try bytes.withUnsafeBufferPointer { try feed($0, emit) }
    }

    public mutating func feed(_ bytes: [UInt8], spans emit: SpanEmit) throws {
        try bytes.withUnsafeBufferPointer { try feed($0, spans: emit) }
    }

    /// The input ended: a number at the very end is complete; anything open is an error.
    public mutating func finish(_ emit: (Event, Int64) throws -> Void) throws {
        try finish(spans: { e, _, end in try emit(e, end) })
    }

    /// `finish` with each event's span (`SpanEmit`).
    public mutating func finish(spans emit: SpanEmit) throws {
        switch token {
        case .number: try endNumber(emit)
        case .literal: try endLiteral(emit)
        case .string: throw fail("unterminated string", at: tokenStart)
        case .none: break
        }
        guard expect == .done else { throw fail(stack.isEmpty && expect == .value ? "empty input" : "unexpected end") }
    }

    // MARK: - Tokens

    private mutating func startToken(_ t: Token) {
        token = t
        tokenStart = offset
        tokenBytes.removeAll(keepingCapacity: true)
        if t == .string { tokenBytes.append(0x22) }
        escaped = false
    }

    private func checkStringLength() throws {
        // A string token holds its opening quote.
        let n = token == .string ? tokenBytes.count - 1 : tokenBytes.count
        if n > maxStringBytes { throw fail("string longer than \(maxStringBytes) bytes", at: tokenStart) }
    }

    private mutating func endString(_ emit: SpanEmit) throws {
        token = .none
        // The one string decoder (escapes, surrogates, UTF-8 checks) on the token with its quotes
        // (the opening one is kept from `startToken`): no copy of the token into a new array.
        tokenBytes.append(0x22)
        var p = JSONParser(bytes: tokenBytes, maxDepth: 1)
        let s: String
        do { s = try p.parseString() } catch {
            throw Failure(offset: tokenStart + Int64(p.i), reason: Self.reason(error))
        }
        if expect == .key || expect == .keyOrEnd {
            expect = .colon
            try emit(.key(s), tokenStart, offset)
        } else {
            afterValue()
            try emit(.value(.string(s)), tokenStart, offset)
        }
    }

    private mutating func endNumber(_ emit: SpanEmit) throws {
        token = .none
        var p = JSONParser(bytes: tokenBytes, maxDepth: 1)
        let v: JSON
        do { v = try p.parseNumber() } catch {
            throw Failure(offset: tokenStart + Int64(p.i), reason: Self.reason(error))
        }
        guard p.i == tokenBytes.count else { throw fail("bad number", at: tokenStart + Int64(p.i)) }
        afterValue()
        try emit(.value(v), tokenStart, offset)
    }

    private mutating func endLiteral(_ emit: SpanEmit) throws {
        token = .none
        let v: JSON
        switch tokenBytes {
        case Array("true".utf8): v = .bool(true)
        case Array("false".utf8): v = .bool(false)
        case Array("null".utf8): v = .null
        default: throw fail("bad literal", at: tokenStart)
        }
        afterValue()
        try emit(.value(v), tokenStart, offset)
    }

    private mutating func afterValue() {
        expect = stack.isEmpty ? .done : .commaOrEnd
    }

    private static func isNumberByte(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2B || c == 0x2E || c == 0x65 || c == 0x45
    }

    private func fail(_ reason: String, at: Int64? = nil) -> Failure { Failure(offset: at ?? offset, reason: reason) }

    /// The parser's reason without its own (token-relative) offset.
    private static func reason(_ e: EmberError) -> String {
        guard case .invalidJSON(let text) = e else { return "\(e)" }
        // The parser's detail ends with its own offset (" at byte N"): cut it.
        let u = Array(text.utf8), marker = Array(" at byte ".utf8)
        var i = u.count - marker.count
        while i >= 0 {
            if Array(u[i..<(i + marker.count)]) == marker { return String(decoding: u[..<i], as: UTF8.self) }
            i -= 1
        }
        return text
    }
}

extension JSONEventReader {
    /// The whole document from `bytes` fed in pieces of `split` bytes, built from the events:
    /// what `JSON.parse` gives for the same bytes (the fuzzer and tests check that). Small inputs.
    public static func parseInPieces(_ bytes: [UInt8], split: Int, maxDepth: Int = Limits.maxJSONDepth) throws -> JSON {
        precondition(split > 0, "pieces need a size")
        var reader = JSONEventReader(maxDepth: maxDepth)
        var stack: [(isArray: Bool, elements: [JSON], members: KeyMap<JSON>, key: String?)] = []
        var result: JSON?
        func put(_ v: JSON) {
            guard !stack.isEmpty else { result = v; return }
            let i = stack.count - 1
            if stack[i].isArray { stack[i].elements.append(v) } else { stack[i].members[stack[i].key!] = v }
        }
        let handle: (Event, Int64) -> Void = { e, _ in
            switch e {
            case .beginObject: stack.append((false, [], [:], nil))
            case .beginArray: stack.append((true, [], [:], nil))
            case .key(let k): stack[stack.count - 1].key = k
            case .value(let v): put(v)
            case .endObject, .endArray:
                let f = stack.removeLast()
                put(f.isArray ? .array(f.elements) : .object(f.members))
            }
        }
        var i = 0
        while i < bytes.count {
            let piece = Array(bytes[i..<min(bytes.count, i + split)])
            try reader.feed(piece, handle)
            i += split
        }
        try reader.finish(handle)
        return result!
    }
}
