/// An incremental JSON reader: bytes go in as they arrive (`feed`, any split), events come out
/// (`Event`), and memory holds the open containers' kinds and one token (a string is bounded by
/// `maxStringBytes`), never the document. Accepts exactly what `JSON.parse` accepts (strings and
/// numbers are decoded by the same parser), with the byte offset of the first error
/// (`JSONEventReader.Failure`). Pure: `ember import` reads multi-gigabyte files through it, as
/// raw events (`feed(_:raw:)`: each primitive as its checked text, no value built).
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
    private enum Open { case none, string, number, literal }
    /// A token split across `feed`s: its kind, its bytes so far and where it began.
    private var token = Open.none
    private var tokenBytes: [UInt8] = []
    private var tokenStart: Int64 = 0
    /// Inside an open string token: its last byte is an unpaired backslash.
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

    /// `feed` with each event's span (`SpanEmit`), values built (`feed(_:raw:)` hands them out
    /// as their text instead).
    public mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, spans emit: SpanEmit) throws {
        try feed(bytes, raw: { e, start, end in try emit(try Self.event(e, at: start), start, end) })
    }

    /// Reads `bytes`, calling `emit` for each event with its span, primitives as their checked
    /// text (`Token`): every check `JSON.parse` makes, no value built. A token whose text lies
    /// in `bytes` is handed out in place; one split across pieces from the reader's buffer.
    public mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, raw emit: RawEmit) throws {
        let base = offset
        let n = bytes.count
        var i = 0
        if token != .none {
            i = try continueToken(bytes, base: base, emit)
            if token != .none { offset = base + Int64(n); return }
        }
        while i < n {
            let c = bytes[i]
            let at = base + Int64(i)
            switch c {
            case 0x20, 0x09, 0x0A, 0x0D:
                break
            case UInt8(ascii: "\""):
                guard expect == .value || expect == .valueOrEnd || expect == .key || expect == .keyOrEnd else {
                    throw fail("unexpected character", at: at)
                }
                let (close, pending) = Self.scanString(bytes, from: i + 1)
                if close == n {
                    try carry(.string, UnsafeBufferPointer(rebasing: bytes[i...]), start: at, escaped: pending)
                    offset = base + Int64(n)
                    return
                }
                let text = UnsafeBufferPointer(rebasing: bytes[i...close])
                guard text.count - 2 <= maxStringBytes else { throw fail("string longer than \(maxStringBytes) bytes", at: at) }
                try endString(text, start: at, emit)
                i = close + 1
                continue
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard expect == .value || expect == .valueOrEnd else { throw fail("unexpected character", at: at) }
                var j = i + 1
                while j < n, Self.isNumberByte(bytes[j]) { j += 1 }
                if j - i > maxStringBytes { throw fail("string longer than \(maxStringBytes) bytes", at: at) }
                if j == n {
                    try carry(.number, UnsafeBufferPointer(rebasing: bytes[i...]), start: at, escaped: false)
                    offset = base + Int64(n)
                    return
                }
                try endNumber(UnsafeBufferPointer(rebasing: bytes[i..<j]), start: at, emit)
                i = j
                continue
            case UInt8(ascii: "a")...UInt8(ascii: "z"):
                guard expect == .value || expect == .valueOrEnd else { throw fail("unexpected character", at: at) }
                var j = i + 1
                while j < n, j - i <= Self.longestLiteral, Self.isLetter(bytes[j]) { j += 1 }
                if j - i > Self.longestLiteral { throw fail("bad literal", at: at) }
                if j == n {
                    try carry(.literal, UnsafeBufferPointer(rebasing: bytes[i...]), start: at, escaped: false)
                    offset = base + Int64(n)
                    return
                }
                try endLiteral(UnsafeBufferPointer(rebasing: bytes[i..<j]), start: at, emit)
                i = j
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard expect == .value || expect == .valueOrEnd else { throw fail("unexpected character", at: at) }
                guard stack.count < maxDepth else { throw fail("nesting too deep", at: at) }
                let isArray = c == UInt8(ascii: "[")
                stack.append(isArray)
                expect = isArray ? .valueOrEnd : .keyOrEnd
                try emit(isArray ? .beginArray : .beginObject, at, at + 1)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                let isArray = c == UInt8(ascii: "]")
                guard let top = stack.last, top == isArray,
                      expect == .commaOrEnd || expect == (isArray ? .valueOrEnd : .keyOrEnd) else {
                    throw fail("unexpected character", at: at)
                }
                stack.removeLast()
                afterValue()
                try emit(isArray ? .endArray : .endObject, at, at + 1)
            case UInt8(ascii: ","):
                guard expect == .commaOrEnd, let top = stack.last else { throw fail("unexpected character", at: at) }
                expect = top ? .value : .key
            case UInt8(ascii: ":"):
                guard expect == .colon else { throw fail("unexpected character", at: at) }
                expect = .value
            default:
                throw fail("unexpected character", at: at)
            }
            i += 1
        }
        offset = base + Int64(n)
    }

    /// Convenience for tests and small inputs.
    public mutating func feed(_ bytes: [UInt8], _ emit: (Event, Int64) throws -> Void) throws {
        try bytes.withUnsafeBufferPointer { try feed($0, emit) }
    }

    public mutating func feed(_ bytes: [UInt8], spans emit: SpanEmit) throws {
        try bytes.withUnsafeBufferPointer { try feed($0, spans: emit) }
    }

    public mutating func feed(_ bytes: [UInt8], raw emit: RawEmit) throws {
        try bytes.withUnsafeBufferPointer { try feed($0, raw: emit) }
    }

    /// The input ended: a number at the very end is complete; anything open is an error.
    public mutating func finish(_ emit: (Event, Int64) throws -> Void) throws {
        try finish(spans: { e, _, end in try emit(e, end) })
    }

    /// `finish` with each event's span (`SpanEmit`).
    public mutating func finish(spans emit: SpanEmit) throws {
        try finish(raw: { e, start, end in try emit(try Self.event(e, at: start), start, end) })
    }

    /// `finish` with raw events (`feed(_:raw:)`).
    public mutating func finish(raw emit: RawEmit) throws {
        switch token {
        case .number: try endCarried(emit)
        case .literal: try endCarried(emit)
        case .string: throw fail("unterminated string", at: tokenStart)
        case .none: break
        }
        guard expect == .done else { throw fail(stack.isEmpty && expect == .value ? "empty input" : "unexpected end", at: offset) }
    }

    // MARK: - Tokens

    /// The letters of the longest literal (`false`).
    private static let longestLiteral = 5

    /// The index of the quote closing a string whose content starts at `from`, or `bytes.count`
    /// when it does not close here (then whether its last byte is an unpaired backslash).
    @inline(__always)
    private static func scanString(_ bytes: UnsafeBufferPointer<UInt8>, from: Int) -> (close: Int, pending: Bool) {
        let n = bytes.count
        var j = from
        while j < n {
            let b = bytes[j]
            if b == 0x22 { return (j, false) }
            j += b == 0x5C ? 2 : 1
        }
        return (n, j > n)
    }

    /// Keeps the start of a token the piece ends in (its bytes are copied: the caller's buffer
    /// goes once `feed` returns).
    private mutating func carry(_ kind: Open, _ bytes: UnsafeBufferPointer<UInt8>, start: Int64, escaped: Bool) throws {
        token = kind
        tokenStart = start
        tokenBytes.removeAll(keepingCapacity: true)
        tokenBytes.append(contentsOf: bytes)
        self.escaped = escaped
        try checkCarriedLength()
    }

    /// Goes on with a token the previous piece ended in; returns where the piece's bytes after
    /// it begin (`bytes.count` while it is still open).
    private mutating func continueToken(_ bytes: UnsafeBufferPointer<UInt8>, base: Int64, _ emit: RawEmit) throws -> Int {
        let n = bytes.count
        guard n > 0 else { return 0 }
        var j = 0
        switch token {
        case .string:
            // After a pending backslash the first byte is taken as it is.
            let (close, pending) = Self.scanString(bytes, from: escaped ? 1 : 0)
            if close == n {
                tokenBytes.append(contentsOf: bytes)
                escaped = pending
                try checkCarriedLength()
                return n
            }
            tokenBytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[...close]))
            j = close + 1
            guard tokenBytes.count - 2 <= maxStringBytes else { throw fail("string longer than \(maxStringBytes) bytes", at: tokenStart) }
        case .number:
            while j < n, Self.isNumberByte(bytes[j]) { j += 1 }
            tokenBytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[..<j]))
            try checkCarriedLength()
            if j == n { return n }
        case .literal:
            while j < n, tokenBytes.count + j <= Self.longestLiteral, Self.isLetter(bytes[j]) { j += 1 }
            tokenBytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[..<j]))
            if tokenBytes.count > Self.longestLiteral { throw fail("bad literal", at: tokenStart) }
            if j == n { return n }
        case .none:
            return 0
        }
        try endCarried(emit)
        return j
    }

    /// Ends the token held in `tokenBytes` (complete).
    private mutating func endCarried(_ emit: RawEmit) throws {
        let kind = token
        token = .none
        // Moved out while it is read (self is mutated meanwhile), and back for its capacity.
        var held: [UInt8] = []
        swap(&held, &tokenBytes)
        defer {
            held.removeAll(keepingCapacity: true)
            swap(&held, &tokenBytes)
        }
        try held.withUnsafeBufferPointer { text in
            switch kind {
            case .string: try endString(text, start: tokenStart, emit)
            case .number: try endNumber(text, start: tokenStart, emit)
            case .literal: try endLiteral(text, start: tokenStart, emit)
            case .none: break
            }
        }
    }

    private func checkCarriedLength() throws {
        // A string token holds its opening quote.
        let n = token == .string ? tokenBytes.count - 1 : tokenBytes.count
        if n > maxStringBytes { throw fail("string longer than \(maxStringBytes) bytes", at: tokenStart) }
    }

    /// A string's text (quotes included): plain (no escape, no control character, valid UTF-8)
    /// is handed out as it is; anything else goes through the one string decoder (escapes,
    /// surrogates, UTF-8), which also names what is wrong and where.
    private mutating func endString(_ text: UnsafeBufferPointer<UInt8>, start: Int64, _ emit: RawEmit) throws {
        let content = UnsafeBufferPointer(rebasing: text[1..<(text.count - 1)])
        let t: Token
        if Self.isPlain(content) {
            t = Token(kind: .string, text: text, decoded: nil, contentBytes: content.count)
        } else {
            var p = JSONParser(bytes: Array(text), maxDepth: 1)
            let s: String
            do { s = try p.parseString() } catch {
                throw Failure(offset: start + Int64(p.i), reason: Self.reason(error))
            }
            t = Token(kind: .string, text: text, decoded: s, contentBytes: s.utf8.count)
        }
        let end = start + Int64(text.count)
        if expect == .key || expect == .keyOrEnd {
            expect = .colon
            try emit(.key(t), start, end)
        } else {
            afterValue()
            try emit(.value(t), start, end)
        }
    }

    /// No escape, no control character, valid UTF-8: the content is the string.
    @inline(__always)
    private static func isPlain(_ content: UnsafeBufferPointer<UInt8>) -> Bool {
        var high = false
        for c in content {
            if c < 0x20 || c == 0x5C { return false }
            if c >= 0x80 { high = true }
        }
        return !high || UTF8Check.isValid(content)
    }

    private mutating func endNumber(_ text: UnsafeBufferPointer<UInt8>, start: Int64, _ emit: RawEmit) throws {
        if !Self.isPlainNumber(text) {
            // The parser's check (exponents and long numbers are range-checked by building
            // them), which also names what is wrong and where.
            var p = JSONParser(bytes: Array(text), maxDepth: 1)
            do { _ = try p.parseNumber() } catch {
                throw Failure(offset: start + Int64(p.i), reason: Self.reason(error))
            }
            guard p.i == text.count else { throw fail("bad number", at: start + Int64(p.i)) }
        }
        afterValue()
        try emit(.value(Token(kind: .number, text: text, decoded: nil, contentBytes: 0)), start, start + Int64(text.count))
    }

    /// A number in JSON's grammar that is surely in range: an integer of at most 18 digits (an
    /// Int64), or a fraction without an exponent of fewer than 300 characters (a finite double).
    /// False sends the text to the parser.
    private static func isPlainNumber(_ t: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = t.count
        var k = t[0] == UInt8(ascii: "-") ? 1 : 0
        let first = k
        guard k < n, isDigit(t[k]) else { return false }
        if t[k] == UInt8(ascii: "0") {
            k += 1
        } else {
            while k < n, isDigit(t[k]) { k += 1 }
        }
        if k == n { return k - first <= 18 }
        guard t[k] == UInt8(ascii: "."), n < 300 else { return false }
        k += 1
        guard k < n, isDigit(t[k]) else { return false }
        while k < n, isDigit(t[k]) { k += 1 }
        return k == n
    }

    private mutating func endLiteral(_ text: UnsafeBufferPointer<UInt8>, start: Int64, _ emit: RawEmit) throws {
        let kind: Token.Kind
        if Self.equals(text, "true") || Self.equals(text, "false") {
            kind = .boolean
        } else if Self.equals(text, "null") {
            kind = .null
        } else {
            throw fail("bad literal", at: start)
        }
        afterValue()
        try emit(.value(Token(kind: kind, text: text, decoded: nil, contentBytes: 0)), start, start + Int64(text.count))
    }

    @inline(__always)
    private static func equals(_ text: UnsafeBufferPointer<UInt8>, _ word: StaticString) -> Bool {
        let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        return text.elementsEqual(w)
    }

    private mutating func afterValue() {
        expect = stack.isEmpty ? .done : .commaOrEnd
    }

    @inline(__always)
    private static func isNumberByte(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2B || c == 0x2E || c == 0x65 || c == 0x45
    }

    @inline(__always)
    private static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    @inline(__always)
    private static func isLetter(_ c: UInt8) -> Bool { c >= 0x61 && c <= 0x7A }

    private func fail(_ reason: String, at: Int64) -> Failure { Failure(offset: at, reason: reason) }

    /// A raw event as the built `Event` (its value as `JSON.parse` builds it).
    private static func event(_ e: RawEvent, at start: Int64) throws -> Event {
        switch e {
        case .beginObject: return .beginObject
        case .endObject: return .endObject
        case .beginArray: return .beginArray
        case .endArray: return .endArray
        case .key(let t): return .key(t.string())
        case .value(let t):
            do { return .value(try t.json()) } catch { throw Failure(offset: start, reason: reason(error)) }
        }
    }

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
