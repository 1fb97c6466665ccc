@testable import EmberCore

// The import's streaming reader and splitter as they were before the raw path (main at
// e145ce9): every key a `String`, every primitive a `JSON`, each string through the parser.
// Kept only as the oracle `ImportRawPathTests` compares the raw path with (same parts, same
// failures at the same offsets); not used by any product code.

struct DecodedEventReader {
    typealias Event = JSONEventReader.Event

    typealias Failure = JSONEventReader.Failure

    let maxDepth: Int
    /// The most bytes of one string as written (escapes included).
    let maxStringBytes: Int
    /// Bytes consumed so far.
    private(set) var offset: Int64 = 0
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

    init(maxDepth: Int = Limits.maxJSONDepth, maxStringBytes: Int = 4 * Limits.maxStringBytes) {
        self.maxDepth = maxDepth
        self.maxStringBytes = maxStringBytes
    }

    /// Open containers now.
    var depth: Int { stack.count }
    /// Where the token being read began (a string, number or literal split across `feed`s);
    /// nil between tokens. The bytes from here on are still to come as an event.
    var openTokenStart: Int64? { token == .none ? nil : tokenStart }
    /// True once a whole document was read (only whitespace may follow).
    var isComplete: Bool { expect == .done && token == .none }

    /// An event with the bytes it spans in the input: `start` is where its token (or bracket)
    /// begins, `end` the offset just past it. A primitive value's span is its exact text.
    typealias SpanEmit = (_ event: Event, _ start: Int64, _ end: Int64) throws -> Void

    /// Reads `bytes`, calling `emit` for each event in order with the offset just past it. After
    /// a failure the reader must not be fed again.
    mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, _ emit: (Event, Int64) throws -> Void) throws {
        try feed(bytes, spans: { e, _, end in try emit(e, end) })
    }

    /// `feed` with each event's span (`SpanEmit`): `ember import` sends a value's text as it is
    /// in the file instead of building and serializing it again.
    mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, spans emit: SpanEmit) throws {
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
    mutating func feed(_ bytes: [UInt8], _ emit: (Event, Int64) throws -> Void) throws {
        try bytes.withUnsafeBufferPointer { try feed($0, emit) }
    }

    mutating func feed(_ bytes: [UInt8], spans emit: SpanEmit) throws {
        try bytes.withUnsafeBufferPointer { try feed($0, spans: emit) }
    }

    /// The input ended: a number at the very end is complete; anything open is an error.
    mutating func finish(_ emit: (Event, Int64) throws -> Void) throws {
        try finish(spans: { e, _, end in try emit(e, end) })
    }

    /// `finish` with each event's span (`SpanEmit`).
    mutating func finish(spans emit: SpanEmit) throws {
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


struct DecodedImportSplitter {
    typealias Part = ImportSplitter.Part

    /// The import's failure: what and where (byte offset in the document), as the reader's.
    typealias Failure = DecodedEventReader.Failure

    let maxPartBytes: Int64
    /// Segments of the import's target: the document's paths are below it.
    let targetDepth: Int

    private struct Frame {
        var key: String?
        var isArray: Bool
        var nextIndex = 0
        /// Offset of its opening bracket.
        var start: Int64
        /// Its depth as `Node.validate` counts it: the target's, plus one per key or index
        /// above it (`.value` adds none: it stands for its object).
        var depth: Int
        /// Members finished while buffered (elements keyed by index), with their text; emptied
        /// once split (its members went out as parts).
        var members: [(key: String, span: Range<Int64>)] = []
        var split = false
        var pendingKey: String?
        var priority: JSON?
        /// A `.value` member and another member (not `.priority`): both together is no node.
        var hasValue = false
        var hasMember = false
        /// Some member is non-empty (not null, or a container holding such a value).
        var nonEmpty = false
    }

    private var frames: [Frame] = []
    /// The first buffered frame (everything before it is split).
    private var bufferRoot = 0

    init(maxPartBytes: Int64, targetDepth: Int) {
        precondition(maxPartBytes > 0, "parts need room")
        self.maxPartBytes = maxPartBytes
        self.targetDepth = targetDepth
    }

    /// The first offset of the document a part still to come may span (nil: none is open). The
    /// caller keeps the bytes from here, and those of a token the reader has open.
    var retainedFrom: Int64? { bufferRoot < frames.count ? frames[bufferRoot].start : nil }

    /// Takes one event with its span (`JSONEventReader.SpanEmit`).
    mutating func handle(_ event: DecodedEventReader.Event, start: Int64, end offset: Int64, _ emit: (Part) throws -> Void) throws {
        switch event {
        case .beginObject, .beginArray:
            let isArray = event == .beginArray
            let key = try memberKey(offset)
            var depth = targetDepth
            if let key, let parent = frames.last {
                if key == ".priority" && !parent.isArray {
                    // A container is never a priority: the same refusal as `Priority(json:)`'s.
                    do { _ = try Priority(json: .array([])) } catch { throw Failure(offset: offset, reason: error.description) }
                }
                depth = parent.depth + (key == ".value" && !parent.isArray ? 0 : 1)
            }
            frames.append(Frame(key: key, isArray: isArray, start: start, depth: depth))
        case .key(let k):
            let i = frames.count - 1
            if k == ".value" {
                frames[i].hasValue = true
            } else if k != ".priority" {
                do { try Key.validate(k) } catch { throw Failure(offset: offset, reason: error.description) }
                frames[i].hasMember = true
            }
            if frames[i].hasValue && frames[i].hasMember {
                throw Failure(offset: offset, reason: EmberError.invalidValueKey.description)
            }
            frames[i].pendingKey = k
        case .value(let v):
            if case .string(let s) = v, s.utf8.count > Limits.maxStringBytes {
                throw Failure(offset: offset, reason: EmberError.stringTooLong(bytes: s.utf8.count).description)
            }
            guard !frames.isEmpty else { return try emitPart([], start..<offset, offset, emit) }
            let key = try memberKey(offset)!
            let i = frames.count - 1
            if key == ".priority" && !frames[i].isArray {
                do { _ = try Priority(json: v) } catch { throw Failure(offset: offset, reason: error.description) }
                frames[i].priority = v
            } else {
                try finished(key, start..<offset, nonEmpty: !v.isNull, offset, emit)
            }
        case .endObject, .endArray:
            let f = frames.removeLast()
            let i = frames.count
            if !f.split {
                // The first buffered frame is a part; a deeper one a member of its parent.
                if i == bufferRoot {
                    try emitPart(frames.compactMap(\.key) + (f.key.map { [$0] } ?? []), f.start..<offset, offset, emit)
                } else {
                    try finished(f.key!, f.start..<offset, nonEmpty: f.nonEmpty, offset, emit)
                }
            } else {
                bufferRoot = i
                if let p = f.priority {
                    let path = frames.compactMap(\.key) + (f.key.map { [$0] } ?? [])
                    try checkDepth(path, offset)
                    try emit(Part(path: path, kind: .priority(p), end: offset))
                }
            }
        }
        try splitIfLarge(offset, emit)
    }

    /// The key the next member of the innermost frame goes under (nil at the top level).
    private mutating func memberKey(_ offset: Int64) throws -> String? {
        guard !frames.isEmpty else { return nil }
        let i = frames.count - 1
        if frames[i].isArray {
            // `Node.validate`: an array with elements puts them one level down.
            if frames[i].depth + 1 > Limits.maxPathDepth {
                throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: frames[i].depth + 1).description)
            }
            defer { frames[i].nextIndex += 1 }
            return String(frames[i].nextIndex)
        }
        guard let k = frames[i].pendingKey else { throw Failure(offset: offset, reason: "a member without its key") }
        frames[i].pendingKey = nil
        return k
    }

    /// A finished member (not a priority) of the innermost frame: kept while it is buffered,
    /// else a part. A non-empty member below the deepest path is refused as the node refuses it.
    private mutating func finished(_ key: String, _ span: Range<Int64>, nonEmpty: Bool, _ offset: Int64,
                                   _ emit: (Part) throws -> Void) throws {
        let i = frames.count - 1
        if nonEmpty {
            let isValue = key == ".value" && !frames[i].isArray
            if !isValue && frames[i].depth + 1 > Limits.maxPathDepth {
                throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: frames[i].depth + 1).description)
            }
            frames[i].nonEmpty = true
        }
        if !frames[i].split {
            frames[i].members.append((key, span))
            return
        }
        let path = frames.compactMap(\.key)
        try emitPart(key == ".value" && !frames[i].isArray ? path : path + [key], span, offset, emit)
    }

    /// Splits the buffered frames whose text passed `maxPartBytes`: their members so far go out
    /// as parts (an object's in key order, a repeated key's last value) and later ones will too.
    private mutating func splitIfLarge(_ offset: Int64, _ emit: (Part) throws -> Void) throws {
        while bufferRoot < frames.count, offset - frames[bufferRoot].start > maxPartBytes {
            let i = bufferRoot
            let path = frames[0...i].compactMap(\.key)
            let members = frames[i].members
            frames[i].members = []
            frames[i].split = true
            bufferRoot = i + 1
            if frames[i].isArray {
                for (k, span) in members { try emitPart(path + [k], span, offset, emit) }
                continue
            }
            var last: [ExactKey: Int] = [:]
            for (n, m) in members.enumerated() { last[ExactKey(m.key)] = n }
            let kept = members.indices.filter { last[ExactKey(members[$0].key)] == $0 }.sorted { KeyOrder.less(members[$0].key, members[$1].key) }
            for n in kept {
                let (k, span) = members[n]
                try emitPart(k == ".value" ? path : path + [k], span, offset, emit)
            }
        }
    }

    private func emitPart(_ path: [String], _ span: Range<Int64>, _ offset: Int64, _ emit: (Part) throws -> Void) throws {
        try checkDepth(path, offset)
        try emit(Part(path: path, kind: .value(span), end: offset))
    }

    /// A part's path (a value's or a priority's) lies within the deepest path below the target.
    private func checkDepth(_ path: [String], _ offset: Int64) throws {
        guard path.count + targetDepth <= Limits.maxPathDepth else {
            throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: path.count + targetDepth).description)
        }
    }
}
