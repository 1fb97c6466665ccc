import EmberCore

/// The parts of a REST URL that Ember understands: the data location, the namespace and the
/// query parameters of reference §1.3, validated. Pure so it can be tested and fuzzed alone.
public struct RestRequest: Sendable, Equatable {
    public enum Print: Sendable { case normal, pretty, silent }
    public enum Target: Sendable, Equatable {
        case data(Path)
        /// `/<path>/.priority.json`
        case priority(Path)
        /// `/.settings/rules.json`
        case rules
        /// `/.settings/triggers.json`
        case triggers
        /// `/.ember/status` and other node endpoints without `.json`.
        case node(String)
    }

    public var target: Target
    public var namespace: String?
    public var print: Print = .normal
    public var export = false
    public var shallow = false
    /// Ember's paging of shallow reads (the console's): `shallow=true&orderBy="$key"&startAfter="k"`
    /// lists only the keys after `k`. Firebase refuses every query parameter but limitToFirst
    /// with shallow, so no Firebase client sends this.
    public var shallowAfter: String?
    /// `consistency=linearizable`: a cluster node confirms with the leader (Raft ReadIndex) that
    /// its state is current before reading. Default `local`: this node's applied state.
    public var linearizable = false
    public var query: QuerySpec?
    /// Milliseconds, from `timeout=`; at most 15 minutes.
    public var timeoutMillis: Int?
    public var authToken: String?
    /// `auth_variable_override`: `.some(nil)` means act unauthenticated.
    public var authOverride: JSON??
    public var methodOverride: String?

    public var path: Path {
        switch target {
        case .data(let p), .priority(let p): return p
        case .rules, .triggers, .node: return .root
        }
    }

    /// Named limit: query strings longer than this are refused before parsing.
    public static let maxQueryBytes = 16 * 1024
    /// Longest request target (path + query) the HTTP parser accepts: the longest Firebase path,
    /// 32 keys of 768 UTF-8 bytes all percent-encoded (32 × (1 + 3 × 768) = 73,760 bytes) plus
    /// `.json` and a query of `maxQueryBytes`, fits (90,149 bytes).
    public static let maxTargetBytes = 96 * 1024
    /// Longest request head the HTTP parser accepts: the target plus every header line.
    public static let maxHeadBytes = 128 * 1024
    public static let maxTimeoutMillis = 15 * 60 * 1000

    public init(target: Target) { self.target = target }

    /// The request a target names when it is a plain data write's: a data path, no query, shallow,
    /// export or method override (what the REST fast paths take; nil for anything else, including
    /// a target that does not parse, which the full path answers).
    public static func plainDataWrite(uri: String) -> RestRequest? {
        if let req = simpleDataTarget(uri) { return req }
        guard let req = try? parse(uri: uri), case .data = req.target, !req.shallow, req.query == nil, !req.export,
              req.methodOverride == nil else { return nil }
        return req
    }

    /// The usual shape of a plain write's target, read from its bytes in one pass: `/a/b.json`
    /// whose keys hold only ASCII letters, digits, `-` and `_` (nothing to decode or refuse), with
    /// no query or exactly `print=silent` / `print=pretty`. nil for anything else, which `parse`
    /// reads in full; where it answers, it is what `parse` gives (RestRequestTests compares them,
    /// and the HTTP head fuzz harness asserts it). Parsing the target was ~9 % of a node's CPU
    /// on small REST writes.
    public static func simpleDataTarget(_ uri: String) -> RestRequest? {
        var uri = uri
        return uri.withUTF8 { u -> RestRequest? in
            // "/" + at least one key byte + ".json"
            guard u.count >= 7, u.count <= maxSimpleTargetBytes, u[0] == UInt8(ascii: "/") else { return nil }
            var end = u.count
            var print = Print.normal
            if let q = u.firstIndex(of: UInt8(ascii: "?")) {
                let query = UnsafeBufferPointer(rebasing: u[(q + 1)...])
                if query.elementsEqual("print=silent".utf8) {
                    print = .silent
                } else if query.elementsEqual("print=pretty".utf8) {
                    print = .pretty
                } else {
                    return nil
                }
                end = q
            }
            guard end >= 7, UnsafeBufferPointer(rebasing: u[(end - 5)..<end]).elementsEqual(".json".utf8) else { return nil }
            var segments: [String] = []
            segments.reserveCapacity(8)
            var start = 1
            for i in 1...(end - 5) {
                let b = i < end - 5 ? u[i] : UInt8(ascii: "/")
                switch b {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                     UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    continue
                case UInt8(ascii: "/"):
                    // Empty segments ("//", a trailing "/") are skipped, as `Path.slashSegments` does.
                    if i > start {
                        guard i - start <= Limits.maxKeyBytes else { return nil }
                        segments.append(String(decoding: UnsafeBufferPointer(rebasing: u[start..<i]), as: UTF8.self))
                        guard segments.count <= Limits.maxPathDepth else { return nil }
                    }
                    start = i + 1
                default:
                    return nil
                }
            }
            var req = RestRequest(target: .data(Path(validated: segments)))
            req.print = print
            return req
        }
    }

    /// Longest target `simpleDataTarget` reads (longer ones take the full parse, which has the
    /// same answer and the limits' error messages).
    static let maxSimpleTargetBytes = 4096

    /// Parses the raw request target (`/a/b.json?x=y`), still percent-encoded.
    public static func parse(uri: String) throws(RestError) -> RestRequest {
        let qIndex = uri.firstIndex(of: "?")
        let rawPath = qIndex.map { uri[..<$0] } ?? uri[...]
        let rawQuery = qIndex.map { uri[uri.index(after: $0)...] } ?? ""
        guard rawQuery.utf8.count <= maxQueryBytes else { throw .badRequest("Query string is too long") }
        var req = RestRequest(target: try parseTarget(rawPath))
        guard let items = PercentDecoding.queryItems(rawQuery) else {
            throw .badRequest("Invalid percent-encoding in the query string")
        }
        try req.applyQuery(items)
        return req
    }

    static func parseTarget(_ raw: Substring) throws(RestError) -> Target {
        if raw == "/.ember/status" || raw.hasPrefix("/.ember/") { return .node(String(raw.dropFirst(8))) }
        switch raw {
        case "/healthz", "/readyz", "/metrics": return .node(String(raw.dropFirst()))
        default: break
        }
        guard raw.hasSuffix(".json") else {
            throw .badRequest("Only URLs ending in .json are supported; use /<path>.json")
        }
        var p = raw.dropLast(5)
        var segments: [String] = []
        for seg in Path.slashSegments(p) {
            guard let d = PercentDecoding.decode(seg) else { throw .badRequest("Invalid percent-encoding in the path") }
            segments.append(d)
        }
        p = ""
        if segments.count == 2 && segments[0] == ".settings" && segments[1] == "rules" { return .rules }
        if segments.count == 2 && segments[0] == ".settings" && segments[1] == "triggers" { return .triggers }
        var isPriority = false
        if segments.last == ".priority" {
            isPriority = true
            segments.removeLast()
        }
        for s in segments {
            do { try Key.validate(s) } catch { throw RestError(error) }
        }
        guard segments.count <= Limits.maxPathDepth else {
            throw RestError(EmberError.pathTooDeep(depth: segments.count))
        }
        let path = Path(validated: segments)
        return isPriority ? .priority(path) : .data(path)
    }

    mutating func applyQuery(_ items: [(String, String)]) throws(RestError) {
        var orderBy: QueryIndex?
        var bounds: [String: String] = [:]
        var limitFirst: Int?, limitLast: Int?
        // Most requests carry one or two parameters: a set only for longer queries.
        var seen = items.count > 8 ? Set<String>(minimumCapacity: items.count) : nil
        for (i, (name, value)) in items.enumerated() {
            // A repeated parameter is ambiguous (the docs: "only one orderBy per request").
            let repeated = seen != nil ? !seen!.insert(name).inserted : items[..<i].contains { $0.0 == name }
            if repeated && name != "ns" { throw .badRequest("Parameter \(name) is repeated") }
            switch name {
            case "ns":
                guard !value.isEmpty, value.utf8.count <= 128, Key.isValid(value) else {
                    throw .badRequest("Invalid namespace")
                }
                namespace = value
            case "print":
                switch value {
                case "pretty": print = .pretty
                case "silent": print = .silent
                default: throw .badRequest("print must be pretty or silent")
                }
            case "format":
                guard value == "export" else { throw .badRequest("format must be export") }
                export = true
            case "shallow":
                guard value == "true" || value == "false" else { throw .badRequest("shallow must be true or false") }
                shallow = value == "true"
            case "consistency":
                guard value == "linearizable" || value == "local" else {
                    throw .badRequest("consistency must be linearizable or local")
                }
                linearizable = value == "linearizable"
            case "timeout":
                timeoutMillis = try Self.parseTimeout(value)
            case "orderBy":
                orderBy = try Self.parseOrderBy(value)
            case "startAt", "endAt", "equalTo", "startAfter", "endBefore":
                bounds[name] = value
            case "limitToFirst", "limitToLast":
                guard let n = Int(value), n >= 0, n <= Int(Int32.max) else {
                    throw .badRequest("\(name) must be a non-negative integer")
                }
                if name == "limitToFirst" { limitFirst = n } else { limitLast = n }
            case "auth", "access_token":
                authToken = value
            case "auth_variable_override":
                do {
                    let j = try JSON.parse(value)
                    switch j {
                    case .null: authOverride = .some(nil)
                    case .object: authOverride = .some(j)
                    default: throw RestError.badRequest("auth_variable_override must be a JSON object or null")
                    }
                } catch let e as RestError { throw e } catch {
                    throw .badRequest("auth_variable_override must be a JSON object or null")
                }
            case "x-http-method-override":
                methodOverride = value.uppercased()
            case "disableTriggers", "writeSizeLimit", "download", "callback", "ac":
                // Accepted for compatibility; they have no effect on a self-hosted node.
                continue
            default:
                throw .badRequest("The request does not support the query parameter \(name)")
            }
        }
        let hasFilters = !bounds.isEmpty || limitFirst != nil || limitLast != nil
        if shallow, orderBy == .key, bounds.count == 1, let after = bounds["startAfter"] {
            guard case .string(let key)? = try? JSON.parse(after) else {
                throw .badRequest("startAfter of a shallow $key page must be a key (a JSON string)")
            }
            do { try Key.validate(key) } catch { throw .badRequest("startAfter: \(error.description)") }
            shallowAfter = key
        } else if shallow && (orderBy != nil || !bounds.isEmpty) {
            throw .badRequest("The request mixes query parameters with a shallow GET request")
        }
        if shallow {
            // firebase-tools sends shallow=true&limitToFirst=N: the first N keys in key order.
            if let n = limitFirst { query = QuerySpec(index: .key).limited(toFirst: n) }
            if limitLast != nil { throw .badRequest("The request mixes query parameters with a shallow GET request") }
            return
        }
        guard let index = orderBy else {
            if hasFilters { throw .badRequest("orderBy must be defined when other query parameters are defined") }
            return
        }
        if limitFirst != nil && limitLast != nil {
            throw .badRequest("limitToFirst and limitToLast cannot both be specified")
        }
        if bounds["equalTo"] != nil && bounds.count > 1 {
            throw .badRequest("equalTo cannot be specified in addition to startAt or endAt")
        }
        if bounds["startAt"] != nil && bounds["startAfter"] != nil {
            throw .badRequest("startAt and startAfter cannot both be specified")
        }
        if bounds["endAt"] != nil && bounds["endBefore"] != nil {
            throw .badRequest("endAt and endBefore cannot both be specified")
        }
        var q = QuerySpec(index: index)
        if let v = bounds["startAt"] { let (b, k) = try Self.parseBound(v, index); q = q.starting(at: b, key: k) }
        if let v = bounds["startAfter"] { let (b, k) = try Self.parseBound(v, index); q = q.starting(after: b, key: k) }
        if let v = bounds["endAt"] { let (b, k) = try Self.parseBound(v, index); q = q.ending(at: b, key: k) }
        if let v = bounds["endBefore"] { let (b, k) = try Self.parseBound(v, index); q = q.ending(before: b, key: k) }
        if let v = bounds["equalTo"] { let (b, k) = try Self.parseBound(v, index); q = q.equal(to: b, key: k) }
        if let n = limitFirst { q = q.limited(toFirst: n) }
        if let n = limitLast { q = q.limited(toLast: n) }
        query = q
    }

    static func parseOrderBy(_ value: String) throws(RestError) -> QueryIndex {
        guard let j = try? JSON.parse(value), case .string(let s) = j else {
            throw .badRequest("orderBy must be a valid JSON encoded path")
        }
        switch s {
        case "$key": return .key
        case "$value": return .value
        case "$priority": return .priority
        default:
            do {
                let p = try Path(s)
                guard !p.isRoot else { throw RestError.badRequest("orderBy must be a valid JSON encoded path") }
                return .child(p)
            } catch let e as RestError { throw e } catch {
                throw .badRequest("orderBy must be a valid JSON encoded path")
            }
        }
    }

    /// `<json>` or `<json>,<json-key>` (the JS REST client's key tie-break form).
    static func parseBound(_ value: String, _ index: QueryIndex) throws(RestError) -> (IndexValue, String?) {
        if let j = try? JSON.parse(value) {
            guard let v = IndexValue(json: j) else { throw .badRequest("Constraint index field must be a JSON primitive") }
            if index == .key, case .string = v {} else if index == .key {
                throw .badRequest("orderBy $key requires string bounds")
            }
            return (v, nil)
        }
        // Try splitting at each comma until both halves parse.
        var idx = value.startIndex
        while let comma = value[idx...].firstIndex(of: ",") {
            if let a = try? JSON.parse(String(value[..<comma])),
               let b = try? JSON.parse(String(value[value.index(after: comma)...])),
               case .string(let key) = b {
                guard let v = IndexValue(json: a) else { throw .badRequest("Constraint index field must be a JSON primitive") }
                return (v, key)
            }
            idx = value.index(after: comma)
        }
        throw .badRequest("Constraint index field must be a JSON primitive")
    }

    static func parseTimeout(_ value: String) throws(RestError) -> Int {
        let units: [(String, Int)] = [("ms", 1), ("min", 60_000), ("s", 1000)]
        for (suffix, factor) in units where value.hasSuffix(suffix) {
            guard let n = Int(value.dropLast(suffix.count)), n > 0 else { break }
            let ms = n.multipliedReportingOverflow(by: factor)
            guard !ms.overflow, ms.partialValue <= maxTimeoutMillis else { break }
            return ms.partialValue
        }
        throw .badRequest("timeout must be a positive duration such as 3ms, 10s or 3min, at most 15min")
    }
}
