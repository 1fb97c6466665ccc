import EmberCore

/// The log encoding of `TriggerOperation` (tag 16 of `WriteOperation`).
extension TriggerOperation {
    static func encode(_ op: TriggerOperation, into w: inout ByteWriter) {
        switch op {
        case .define(let text): w.u8(1); w.string(text)
        case .settle(let name, let indexes, let dead):
            w.u8(2); w.string(name); w.varint(indexes.count)
            for i in indexes { w.u64(i) }
            if let dead { w.u8(1); w.string(dead) } else { w.u8(0) }
        case .halt(let name, let reason): w.u8(3); w.string(name); w.string(reason)
        case .pause(let name): w.u8(4); w.string(name)
        case .resume(let name): w.u8(5); w.string(name)
        case .replay(let name, let from): w.u8(6); w.string(name); w.u64(from)
        case .advance(let cursors):
            w.u8(7); w.varint(cursors.count)
            for c in cursors {
                w.string(c.name); w.u64(c.group); w.u64(c.through); w.varint(c.rows.count)
                for i in c.rows { w.u64(i) }
            }
        }
    }

    static func decode(_ r: inout ByteReader, limit: Int) throws(StorageError) -> TriggerOperation {
        switch try r.u8() {
        case 1: return .define(text: try r.string())
        case 2:
            let name = try r.string()
            let n = try r.varint()
            guard n <= limit / 8 else { throw .corrupt("trigger settle count") }
            var indexes: [UInt64] = []
            indexes.reserveCapacity(n)
            for _ in 0..<n { indexes.append(try r.u64()) }
            let dead: String? = try r.u8() == 1 ? try r.string() : nil
            return .settle(name: name, indexes: indexes, deadLetter: dead)
        case 3: return .halt(name: try r.string(), reason: try r.string())
        case 4: return .pause(name: try r.string())
        case 5: return .resume(name: try r.string())
        case 6: return .replay(name: try r.string(), from: try r.u64())
        case 7:
            let n = try r.varint()
            guard n <= TriggerOperation.maxCursors else { throw .corrupt("trigger cursor count") }
            var cursors: [TriggerCursor] = []
            for _ in 0..<n {
                let name = try r.string(), group = try r.u64(), through = try r.u64()
                let k = try r.varint()
                guard k <= limit / 8 else { throw .corrupt("trigger cursor rows") }
                var rows: [UInt64] = []
                rows.reserveCapacity(k)
                for _ in 0..<k { rows.append(try r.u64()) }
                cursors.append(TriggerCursor(name: name, group: group, through: through, rows: rows))
            }
            return .advance(cursors)
        default: throw .corrupt("trigger operation")
        }
    }
}
