import EmberCore

/// A tree record's value and key written as JSON straight from their stored bytes, for a streamed
/// read (`TreeStream`): the same bytes as `Node.toJSON()` / `exportJSON()` serialized, without the
/// `Leaf`, `Node`, `JSON` values, strings and dictionaries made, sorted and freed per record in
/// between. Those were most of a streamed export's CPU (perf, release emberd, 256 MB export:
/// decoding keys into strings, building each inline object's node and JSON, sorting its keys
/// again, freeing it all).
enum RecordJSON {
    /// `KeyCodec.segment(".priority")`: segment bytes order as keys do (`KeyOrder`), so where an
    /// export's `.priority` member goes among a node's children is one byte comparison.
    static let prioritySegment = KeyCodec.segment(".priority")

    /// Writes the value of the leaf (tags 1, 3) or inline object (tag 4) record `v` as `w`'s
    /// next value. False, with nothing written, when the general path must write it: outside an
    /// export, an inline object whose first key is an array index (`toJSON` may make it an array).
    static func writeValue(_ v: [UInt8], export: Bool, into w: inout JSONStreamWriter) throws(StorageError) -> Bool {
        var r = ByteReader(v)
        switch try r.u8() {
        case 1, 3:
            let leafAt = r.i
            try r.skipLeaf()
            if export, try r.peek() != 0 {
                // {".priority": p, ".value": v}, as `exportJSON` gives a leaf with a priority.
                w.beginObject()
                w.key(".priority")
                try w.scalar { (out: inout [UInt8]) throws(StorageError) in try r.writePriority(into: &out) }
                w.key(".value")
                r.i = leafAt
                try w.scalar { (out: inout [UInt8]) throws(StorageError) in try r.writeLeaf(into: &out) }
                w.end()
            } else {
                r.i = leafAt
                try w.scalar { (out: inout [UInt8]) throws(StorageError) in try r.writeLeaf(into: &out) }
            }
            return true
        case InlineObject.tag:
            return try writeInline(&r, export: export, into: &w)
        case let t:
            throw .corrupt("tree record tag \(t)")
        }
    }

    /// An inline object (`InlineObject.encoded`): its children are stored in key order, the order
    /// `JSONWriter` sorts an object's keys into.
    private static func writeInline(_ r: inout ByteReader, export: Bool, into w: inout JSONStreamWriter) throws(StorageError) -> Bool {
        _ = try r.uvarint()  // version
        var priorityAt: Int? = nil
        if try r.peek() != 0 { priorityAt = r.i }
        try r.skipPriority()
        let n = try r.varint()
        guard n >= 1, n <= InlineObject.maxChildren else { throw .corrupt("inline object of \(n) children") }
        if !export {
            // Keys in key order: the object is no array unless its first key is an index.
            let first = try r.nextStringRange()
            if r.bytes.withUnsafeBufferPointer({ isArrayIndex(UnsafeBufferPointer(rebasing: $0[first])) }) { return false }
            priorityAt = nil  // `toJSON` has no priorities
        }
        w.beginObject()
        for _ in 0..<n {
            let key = try r.stringRange()
            if let p = priorityAt, KeyOrder.less(".priority", String(decoding: r.bytes[key], as: UTF8.self)) {
                try writePriorityMember(&r, at: p, into: &w)
                priorityAt = nil
            }
            r.bytes.withUnsafeBufferPointer { w.key(utf8: UnsafeBufferPointer(rebasing: $0[key])) }
            let tag = try r.u8()
            let leafAt = r.i
            try r.skipCompactLeaf(tag)
            if export, tag & 0xF0 != 0 {
                // The priority follows the leaf in the record and comes first in the JSON.
                w.beginObject()
                w.key(".priority")
                try w.scalar { (out: inout [UInt8]) throws(StorageError) in try r.writeCompactPriority(tag, into: &out) }
                w.key(".value")
                let end = r.i
                r.i = leafAt
                try w.scalar { (out: inout [UInt8]) throws(StorageError) in try r.writeCompactLeaf(tag, into: &out) }
                w.end()
                r.i = end
            } else {
                let end = r.i
                r.i = leafAt
                try w.scalar { (out: inout [UInt8]) throws(StorageError) in try r.writeCompactLeaf(tag, into: &out) }
                r.i = end
                try r.skipCompactPriority(tag)
            }
        }
        if let p = priorityAt { try writePriorityMember(&r, at: p, into: &w) }
        guard r.atEnd else { throw .corrupt("inline object trailing bytes") }
        w.end()
        return true
    }

    private static func writePriorityMember(_ r: inout ByteReader, at p: Int, into w: inout JSONStreamWriter) throws(StorageError) {
        let back = r.i
        r.i = p
        w.key(".priority")
        try w.scalar { (out: inout [UInt8]) throws(StorageError) in try r.writePriority(into: &out) }
        r.i = back
    }

    /// The key of a stored segment (`KeyCodec`) as the next member's key of `w`.
    static func writeKey(_ k: [UInt8], segment: Range<Int>, into w: inout JSONStreamWriter) throws(StorageError) {
        let text = try textRange(k, segment)
        // Text-order bytes differ from UTF-8 only for 0xEE and 0xEF lead bytes (rare): those
        // keys go through their string.
        if k[segment.lowerBound] == 0x02 && k[text].contains(where: { $0 >= 0xF5 }) {
            w.key(KeyCodec.text(k[text]))
            return
        }
        k.withUnsafeBufferPointer { w.key(utf8: UnsafeBufferPointer(rebasing: $0[text])) }
    }

    /// Whether the stored segment's key is an array index (`Node.arrayIndex` of it is not nil).
    static func isArrayIndexSegment(_ k: [UInt8], _ segment: Range<Int>) -> Bool {
        // Array indices parse as 32-bit integers: they are stored in the integer form.
        guard k[segment.lowerBound] == 0x01, let text = try? textRange(k, segment) else { return false }
        return k.withUnsafeBufferPointer { isArrayIndex(UnsafeBufferPointer(rebasing: $0[text])) }
    }

    /// The key's UTF-8 (integer form) or text-order bytes (text form) inside a segment.
    private static func textRange(_ k: [UInt8], _ segment: Range<Int>) throws(StorageError) -> Range<Int> {
        switch k[segment.lowerBound] {
        case 0x01:
            guard segment.count >= 8 else { throw .corrupt("tree key") }
            return (segment.lowerBound + 7)..<(segment.upperBound - 1)
        case 0x02: return (segment.lowerBound + 1)..<(segment.upperBound - 1)
        default: throw .corrupt("tree key")
        }
    }

    /// `Node.arrayIndex`'s test on UTF-8: `^(0|[1-9]\d*)$`, at most 9 digits.
    static func isArrayIndex(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !u.isEmpty, u.count <= 9 else { return false }
        if u.count > 1 && u[0] == 48 { return false }
        return u.allSatisfy { $0 >= 48 && $0 <= 57 }
    }
}

extension ByteReader {
    fileprivate func peek() throws(StorageError) -> UInt8 {
        guard i < bytes.count else { throw .corrupt("truncated") }
        return bytes[i]
    }

    /// The bytes of the `string()` at the reader's position, the reader left where it is.
    fileprivate func nextStringRange() throws(StorageError) -> Range<Int> {
        var r = self
        return try r.stringRange()
    }

    /// A `string()`'s bytes, skipped.
    fileprivate mutating func stringRange() throws(StorageError) -> Range<Int> {
        let n = try varint()
        guard i + n <= bytes.count else { throw .corrupt("truncated string") }
        defer { i += n }
        return i..<(i + n)
    }

    fileprivate mutating func writeString(into out: inout [UInt8]) throws(StorageError) {
        let s = try stringRange()
        bytes.withUnsafeBufferPointer { JSONStreamWriter.appendString(utf8: UnsafeBufferPointer(rebasing: $0[s]), to: &out) }
    }

    /// `leaf()`'s value as JSON (`Leaf.json` serialized).
    fileprivate mutating func writeLeaf(into out: inout [UInt8]) throws(StorageError) {
        switch try u8() {
        case 1: JSONStreamWriter.appendBool(false, to: &out)
        case 2: JSONStreamWriter.appendBool(true, to: &out)
        case 3: JSONStreamWriter.appendInt(try i64(), to: &out)
        case 4: JSONStreamWriter.appendDouble(try f64(), to: &out)
        case 5: try writeString(into: &out)
        case let t: throw .corrupt("leaf tag \(t)")
        }
    }

    fileprivate mutating func skipLeaf() throws(StorageError) {
        switch try u8() {
        case 1, 2: return
        case 3, 4: _ = try u64()
        case 5: _ = try stringRange()
        case let t: throw .corrupt("leaf tag \(t)")
        }
    }

    /// A present `priority()` as JSON (`Priority.json` serialized).
    fileprivate mutating func writePriority(into out: inout [UInt8]) throws(StorageError) {
        switch try u8() {
        case 1: JSONStreamWriter.appendDouble(try f64(), to: &out)
        case 2: try writeString(into: &out)
        case let t: throw .corrupt("priority tag \(t)")
        }
    }

    fileprivate mutating func skipPriority() throws(StorageError) {
        switch try u8() {
        case 0: return
        case 1: _ = try u64()
        case 2: _ = try stringRange()
        case let t: throw .corrupt("priority tag \(t)")
        }
    }

    /// `compactLeaf()`'s value (tag already read) as JSON.
    fileprivate mutating func writeCompactLeaf(_ t: UInt8, into out: inout [UInt8]) throws(StorageError) {
        switch t & 0x0F {
        case 1: JSONStreamWriter.appendBool(false, to: &out)
        case 2: JSONStreamWriter.appendBool(true, to: &out)
        case 3:
            let z = try uvarint()
            JSONStreamWriter.appendInt(Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1))), to: &out)
        case 4: JSONStreamWriter.appendDouble(try f64(), to: &out)
        case 5: try writeString(into: &out)
        default: throw .corrupt("inline leaf tag \(t)")
        }
    }

    fileprivate mutating func skipCompactLeaf(_ t: UInt8) throws(StorageError) {
        switch t & 0x0F {
        case 1, 2: return
        case 3: _ = try uvarint()
        case 4: _ = try u64()
        case 5: _ = try stringRange()
        default: throw .corrupt("inline leaf tag \(t)")
        }
    }

    /// The priority after a compact leaf (its kind in the tag's high bits) as JSON.
    fileprivate mutating func writeCompactPriority(_ t: UInt8, into out: inout [UInt8]) throws(StorageError) {
        switch t & 0xF0 {
        case 0x10: JSONStreamWriter.appendDouble(try f64(), to: &out)
        case 0x20: try writeString(into: &out)
        default: throw .corrupt("inline leaf priority tag \(t)")
        }
    }

    fileprivate mutating func skipCompactPriority(_ t: UInt8) throws(StorageError) {
        switch t & 0xF0 {
        case 0: return
        case 0x10: _ = try u64()
        case 0x20: _ = try stringRange()
        default: throw .corrupt("inline leaf priority tag \(t)")
        }
    }
}
