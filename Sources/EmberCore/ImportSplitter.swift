/// Cuts a JSON document read as events (`JSONEventReader`) into parts an import writes one
/// multi-path update at a time: a subtree whose text is at most `maxPartBytes` is one part (its
/// path and value); a larger one is split into its members, recursively, so memory holds at
/// most about one part's subtree whatever the document's size. Parts come in document order;
/// their paths are disjoint, so writing them all into an emptied location gives the document.
///
/// Validates as it goes (with the byte offset of the first problem): keys (`Key.validate`;
/// `.priority` and `.value` where Firebase allows them), the depth below the import's
/// target, string sizes and each part as a `Node`.
///
/// The priority of an object too large for one part cannot be written with its members (a
/// multi-path update cannot address `.priority`): it comes out as a `.priority` part after the
/// object's members, for the caller to set on its own.
public struct ImportSplitter: Sendable {
    public struct Part: Sendable, Equatable {
        public enum Kind: Sendable, Equatable { case value, priority }
        public var path: [String]
        public var value: JSON
        public var kind: Kind
        /// The document's bytes up to the end of this part.
        public var end: Int64
    }

    /// The import's failure: what and where (byte offset in the document), as the reader's.
    public typealias Failure = JSONEventReader.Failure

    public let maxPartBytes: Int64
    /// Segments of the import's target: the document's paths are below it.
    public let targetDepth: Int

    private struct Frame {
        var key: String?
        var isArray: Bool
        var nextIndex = 0
        var start: Int64
        /// Members read so far while buffered; nil once split (its members went out as parts).
        var members: KeyMap<JSON>? = [:]
        var elements: [JSON] = []
        var pendingKey: String?
        var priority: JSON?
        /// Split frames: whether a `.value` member and whether another member went out (both
        /// together is no node: `.value` stands for the whole of it).
        var sentValue = false
        var sentMember = false
    }

    private var frames: [Frame] = []
    /// The first buffered frame (everything before it is split).
    private var bufferRoot = 0

    public init(maxPartBytes: Int64, targetDepth: Int) {
        precondition(maxPartBytes > 0, "parts need room")
        self.maxPartBytes = maxPartBytes
        self.targetDepth = targetDepth
    }

    /// Takes one event; `offset` is the reader's offset after it (`JSONEventReader.offset`).
    public mutating func handle(_ event: JSONEventReader.Event, offset: Int64, _ emit: (Part) throws -> Void) throws {
        switch event {
        case .beginObject, .beginArray:
            // A split parent makes this frame the first buffered one (`bufferRoot` = its index).
            let key = try memberKey(offset)
            if let key, frames.count - 1 < bufferRoot { try noteSplitMember(frames.count - 1, key, offset) }
            frames.append(Frame(key: key, isArray: event == .beginArray, start: offset - 1))
        case .key(let k):
            if k != ".priority" && k != ".value" {
                do { try Key.validate(k) } catch { throw Failure(offset: offset, reason: error.description) }
            }
            frames[frames.count - 1].pendingKey = k
        case .value(let v):
            if case .string(let s) = v, s.utf8.count > Limits.maxStringBytes {
                throw Failure(offset: offset, reason: EmberError.stringTooLong(bytes: s.utf8.count).description)
            }
            guard !frames.isEmpty else { return try emitPart([], v, offset, emit) }
            let key = try memberKey(offset)!
            try add(key, v, offset, emit)
        case .endObject, .endArray:
            let f = frames.removeLast()
            let i = frames.count
            let path = frames.compactMap(\.key) + (f.key.map { [$0] } ?? [])
            if let members = f.members {
                var value: JSON
                if f.isArray {
                    value = .array(f.elements)
                } else {
                    var m = members
                    if let p = f.priority { m[".priority"] = p }
                    value = .object(m)
                }
                // The first buffered frame is a part; a deeper one a member of its parent.
                if i == bufferRoot { try emitPart(path, value, offset, emit) } else { try add(f.key!, value, offset, emit) }
            } else {
                bufferRoot = i
                if let p = f.priority { try emit(Part(path: path, value: p, kind: .priority, end: offset)) }
            }
        }
        try splitIfLarge(offset, emit)
    }

    /// The key the next member of the innermost frame goes under (nil at the top level).
    private mutating func memberKey(_ offset: Int64) throws -> String? {
        guard !frames.isEmpty else { return nil }
        let i = frames.count - 1
        if frames[i].isArray {
            defer { frames[i].nextIndex += 1 }
            return String(frames[i].nextIndex)
        }
        guard let k = frames[i].pendingKey else { throw Failure(offset: offset, reason: "a member without its key") }
        frames[i].pendingKey = nil
        return k
    }

    /// A finished member of the innermost frame: kept while it is buffered, else a part.
    private mutating func add(_ key: String, _ v: JSON, _ offset: Int64, _ emit: (Part) throws -> Void) throws {
        let i = frames.count - 1
        if key == ".priority" && !frames[i].isArray {
            frames[i].priority = v
            return
        }
        if frames[i].members != nil {
            if frames[i].isArray { frames[i].elements.append(v) } else { frames[i].members![key] = v }
            return
        }
        let path = frames.compactMap(\.key)
        try noteSplitMember(i, key, offset)
        try emitPart(key == ".value" ? path : path + [key], v, offset, emit)
    }

    private mutating func noteSplitMember(_ i: Int, _ key: String, _ offset: Int64) throws {
        if key == ".value" { frames[i].sentValue = true } else { frames[i].sentMember = true }
        if frames[i].sentValue && frames[i].sentMember {
            throw Failure(offset: offset, reason: EmberError.invalidValueKey.description)
        }
    }

    /// Splits the buffered frames whose text passed `maxPartBytes`: their members so far go out
    /// as parts and later ones will too.
    private mutating func splitIfLarge(_ offset: Int64, _ emit: (Part) throws -> Void) throws {
        while bufferRoot < frames.count, offset - frames[bufferRoot].start > maxPartBytes {
            let i = bufferRoot
            let path = frames[0...i].compactMap(\.key)
            if frames[i].isArray {
                for (n, e) in frames[i].elements.enumerated() { try emitPart(path + [String(n)], e, offset, emit) }
                frames[i].elements = []
            } else {
                let members = frames[i].members!
                for k in members.keys.sorted(by: KeyOrder.less) {
                    try noteSplitMember(i, k, offset)
                    try emitPart(k == ".value" ? path : path + [k], members[k]!, offset, emit)
                }
            }
            frames[i].members = nil
            bufferRoot = i + 1
        }
    }

    private func emitPart(_ path: [String], _ value: JSON, _ offset: Int64, _ emit: (Part) throws -> Void) throws {
        guard path.count + targetDepth <= Limits.maxPathDepth else {
            throw Failure(offset: offset, reason: EmberError.pathTooDeep(depth: path.count + targetDepth).description)
        }
        // The whole part as the node will take it: `.value`/`.priority` forms, nesting, sizes.
        do { _ = try Node.validate(json: value, depth: path.count + targetDepth) } catch {
            throw Failure(offset: offset, reason: error.description)
        }
        try emit(Part(path: path, value: value, kind: .value, end: offset))
    }
}
