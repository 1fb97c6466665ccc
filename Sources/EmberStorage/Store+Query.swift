import EmberCore

/// Query evaluation. Results equal `spec.window(of: node)` on the full node at `path`.
///
/// * `.key`: a cursor walk over the children (one seek per child, from the start bound or from
///   the end bound backwards for limitToLast); only the children returned are read.
/// * `.child(p)` / `.value` with an index defined for `path`: a range scan of the index from
///   the bound; only the children returned are read.
/// * `.priority`, or an unindexed child/value query: the node is read and windowed in memory
///   (check `hasIndex` first to answer "Index not defined").
extension EmberStore {
    public func query(namespace: String, path: Path, spec: QuerySpec) throws -> [(key: String, node: Node)] {
        try KeyCodec.validateNamespace(namespace)
        return try withVisibleRead { t in
            switch try querySelection(t, namespace: namespace, path: path, spec: spec) {
            case .whole(let window): return window
            case .keys(let keys):
                let base = Tables.treeKey(namespace, path)
                return try keys.map { k in (k, try tables.readNode(t, key: base + KeyCodec.segment(k))) }
            }
        }
    }

    /// The children a query selects at `path`, read in `t`: their keys when the tree or an index
    /// gives them without reading the location (the children are then read, or streamed, from
    /// the same snapshot), else the window computed from the location read whole.
    func querySelection(_ t: Txn, namespace: String, path: Path, spec: QuerySpec) throws -> QuerySelection {
        let base = Tables.treeKey(namespace, path)
        switch spec.index {
        case .key:
            return try keyQuery(t, base: base, spec: spec)
        case .value, .child:
            if let def = try tables.indexDefs(t, namespace).first(where: { $0.index == spec.index && $0.matches(path) }) {
                // A location without an id has no rows: no child.
                guard let id = try tables.locationId(t, IndexLocations.key(ns: namespace, def: def, location: path)) else {
                    return .keys([])
                }
                return .keys(try indexQuery(t, base: base, prefix: id, spec: spec))
            }
            return .whole(spec.window(of: try tables.readNode(t, key: base)))
        case .priority:
            return .whole(spec.window(of: try tables.readNode(t, key: base)))
        }
    }

    /// The bound as (value, key) with sentinel names, like `QuerySpec`'s own evaluation.
    static func post(_ spec: QuerySpec, _ b: QueryBound, isStart: Bool) -> (IndexValue, String) {
        if spec.index == .key {
            if case .string(let s) = b.value { return (.null, s) }
            return (.null, isStart ? KeyOrder.minName : KeyOrder.maxName)
        }
        return (b.value, b.name ?? (isStart ? KeyOrder.minName : KeyOrder.maxName))
    }

    static func compare(_ v: IndexValue, _ key: String, _ p: (IndexValue, String), keyIndex: Bool) -> Int {
        if !keyIndex {
            let c = v.compare(p.0)
            if c != 0 { return c }
        }
        return KeyOrder.compare(key, p.1)
    }

    /// -1: before the start bound, 1: after the end bound, 0: inside.
    static func position(_ spec: QuerySpec, _ v: IndexValue, _ key: String) -> Int {
        let ki = spec.index == .key
        if let s = spec.start {
            let c = compare(v, key, post(spec, s, isStart: true), keyIndex: ki)
            if s.inclusive ? c < 0 : c <= 0 { return -1 }
        }
        if let e = spec.end {
            let c = compare(v, key, post(spec, e, isStart: false), keyIndex: ki)
            if e.inclusive ? c > 0 : c >= 0 { return 1 }
        }
        return 0
    }

    /// A seekable encoding of a bound name, when it is a real key (not a sentinel).
    static func seekSegment(_ name: String) -> [UInt8]? {
        if name == KeyOrder.minName || name == KeyOrder.maxName { return nil }
        if name.isEmpty || name.utf8.contains(where: { $0 < 2 }) || name.utf8.count > Limits.maxKeyBytes { return nil }
        return KeyCodec.segment(name)
    }

    func keyQuery(_ t: Txn, base: [UInt8], spec: QuerySpec) throws -> QuerySelection {
        let limit = spec.limit ?? .max
        var keys: [String] = []
        if limit == 0 { return .keys([]) }
        var c = try t.cursor(tables.treeS, within: base, keysOnly: true)
        defer { c.close() }
        if spec.limit == nil || spec.limitFromStart {
            var seek = base + [0x01]
            if let s = spec.start, let seg = Self.seekSegment(Self.post(spec, s, isStart: true).1) { seek = base + seg }
            while keys.count < limit, let k = try c.seekKey(seek), k.starts(with: base), k.count > base.count {
                var i = base.count
                guard let key = KeyCodec.readSegment(k, &i) else { throw StorageError.corrupt("tree key") }
                let pos = Self.position(spec, .null, key)
                if pos > 0 { break }
                if pos == 0 { keys.append(key) }
                seek = Array(k[0..<i]) + [0xFF]
            }
        } else {
            var seek = base + [0xFF]
            if let e = spec.end, let seg = Self.seekSegment(Self.post(spec, e, isStart: false).1) { seek = base + seg + [0xFF] }
            while keys.count < limit, let (k, _) = try c.seekLastLT(seek), k.starts(with: base), k.count > base.count {
                var i = base.count
                guard let key = KeyCodec.readSegment(k, &i) else { throw StorageError.corrupt("tree key") }
                let pos = Self.position(spec, .null, key)
                if pos < 0 { break }
                if pos == 0 { keys.append(key) }
                seek = Array(k[0..<i])
            }
            keys.reverse()
        }
        // No child record: an inline object keeps its children (a few leaves) in its own record.
        if keys.isEmpty, let v = try t.get(tables.treeS, base), v.first == InlineObject.tag {
            return .whole(spec.window(of: try InlineObject.decode(v).node))
        }
        return .keys(keys)
    }

    func indexQuery(_ t: Txn, base: [UInt8], prefix: [UInt8], spec: QuerySpec) throws -> [String] {
        let limit = spec.limit ?? .max
        if limit == 0 { return [] }
        struct Hit { var ivKey: ArraySlice<UInt8>; var value: IndexValue; var key: String; var truncated: Bool }
        func decode(_ k: [UInt8], _ v: [UInt8]) throws -> Hit {
            let (value, off) = try IndexRowValue.decode(key: k, value: v, valueStart: prefix.count)
            var i = off
            guard off <= k.count, let key = KeyCodec.readSegment(k, &i) else { throw StorageError.corrupt("index key") }
            let ivKey = k[prefix.count..<off]
            return Hit(ivKey: ivKey, value: value, key: key, truncated: ivKey.count >= 2 && ivKey.last == 0x02 && ivKey[ivKey.endIndex - 2] == 0)
        }
        func boundKey(_ b: QueryBound, isStart: Bool) -> [UInt8] {
            let (v, name) = Self.post(spec, b, isStart: isStart)
            var key = prefix
            let truncated = KeyCodec.appendIndexValue(v, to: &key)
            if truncated { return isStart ? key : key + [0xFF] }
            if let seg = Self.seekSegment(name) { return isStart ? key + seg : key + seg + [0xFF] }
            return (name == KeyOrder.maxName) ? key + [0xFF] : (isStart ? key : key + [0xFF])
        }
        var hits: [Hit] = []
        var scanned: UInt64 = 0
        var c = try t.cursor(tables.idxS, within: prefix)
        defer {
            c.close()
            core.indexEntriesScanned.add(scanned, ordering: .relaxed)
        }
        let forward = spec.limit == nil || spec.limitFromStart
        // Entries whose strings were truncated in the key are ordered by child key within their
        // group; keep reading to the end of such a group, then sort exactly.
        if forward {
            var entry = try c.seek(spec.start.map { boundKey($0, isStart: true) } ?? prefix)
            var count = 0
            while let (k, v) = entry, k.starts(with: prefix) {
                let h = try decode(k, v)
                scanned += 1
                if count >= limit, let last = hits.last, !(last.truncated && last.ivKey == h.ivKey) { break }
                let pos = Self.position(spec, h.value, h.key)
                if pos == 0 { hits.append(h); count += 1 }
                else if pos > 0 && !h.truncated { break }
                entry = try c.next()
            }
        } else {
            let endKey = spec.end.map { boundKey($0, isStart: false) } ?? (prefix + [0xFF])
            var entry = try c.seekLastLE(endKey)
            var count = 0
            while let (k, v) = entry, k.starts(with: prefix) {
                let h = try decode(k, v)
                scanned += 1
                if count >= limit, let last = hits.last, !(last.truncated && last.ivKey == h.ivKey) { break }
                let pos = Self.position(spec, h.value, h.key)
                if pos == 0 { hits.append(h); count += 1 }
                else if pos < 0 && !h.truncated { break }
                entry = try c.prev()
            }
        }
        hits.sort { a, b in
            let x = a.value.compare(b.value)
            return x != 0 ? x < 0 : KeyOrder.compare(a.key, b.key) < 0
        }
        if hits.count > limit { hits = forward ? Array(hits.prefix(limit)) : Array(hits.suffix(limit)) }
        return hits.map(\.key)
    }
}

/// The children a query selects (`EmberStore.querySelection`).
enum QuerySelection {
    /// Keys only, in no particular order: each child is read (or streamed) from the snapshot.
    case keys([String])
    /// The window already read (the location was read whole: unindexed, by priority, inline).
    case whole([(key: String, node: Node)])
}
