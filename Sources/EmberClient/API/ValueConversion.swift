import EmberCore
import Foundation

/// Conversion between the SDK's `Any` values and the JSON/Node model.
///
/// Values read from snapshots: `nil` for no data; `String`; `Bool`; numbers as `NSNumber` (so
/// both `as? Int` and `as? Double` work, as with the iOS SDK); objects as `[String: Any]`;
/// array-like objects (keys 0…n, more than half present) as `[Any]` with `NSNull` for holes.
/// Values written: `nil`/`NSNull`, `String`, `Bool`, any Swift integer or floating type,
/// `NSNumber`, `[String: Any]`, `[Any]`, `ServerValue` placeholders and `EmberCore.JSON`.
enum ValueConverter {
    static func json(from value: Any?) throws(DatabaseError) -> JSON {
        guard let value else { return .null }
        if let json = value as? JSON { return json }
        if value is NSNull { return .null }
        if let s = value as? String { return .string(s) }
        if let s = value as? Substring { return .string(String(s)) }
        // Exact Swift types first: with Foundation's bridging a Bool could otherwise pass as 1.
        switch value {
        case let v as Bool where type(of: value) == Bool.self: return .bool(v)
        case let v as Int where type(of: value) == Int.self: return .int(Int64(v))
        case let v as Int64 where type(of: value) == Int64.self: return .int(v)
        case let v as Int32 where type(of: value) == Int32.self: return .int(Int64(v))
        case let v as Int16 where type(of: value) == Int16.self: return .int(Int64(v))
        case let v as Int8 where type(of: value) == Int8.self: return .int(Int64(v))
        case let v as UInt where type(of: value) == UInt.self: return number(UInt64(v))
        case let v as UInt64 where type(of: value) == UInt64.self: return number(v)
        case let v as UInt32 where type(of: value) == UInt32.self: return .int(Int64(v))
        case let v as UInt16 where type(of: value) == UInt16.self: return .int(Int64(v))
        case let v as UInt8 where type(of: value) == UInt8.self: return .int(Int64(v))
        case let v as Double where type(of: value) == Double.self: return try finite(v)
        case let v as Float where type(of: value) == Float.self: return try finite(Double(v))
        default: break
        }
        if let n = value as? NSNumber, type(of: value) is NSNumber.Type {
            let t = String(cString: n.objCType)
            if t == "c" || t == "B" { return .bool(n.boolValue) }
            if t == "f" || t == "d" { return try finite(n.doubleValue) }
            return .int(n.int64Value)
        }
        if let dict = value as? [String: Any] {
            var o: [String: JSON] = [:]
            for (k, v) in dict { o[k] = try json(from: v) }
            return .object(o)
        }
        if let dict = value as? [AnyHashable: Any] {
            var o: [String: JSON] = [:]
            for (k, v) in dict {
                guard let key = k.base as? String else { throw DatabaseError(code: .invalidData, message: "Keys must be strings: \(k)") }
                o[key] = try json(from: v)
            }
            return .object(o)
        }
        if let array = value as? [Any] { return .array(try array.map { v throws(DatabaseError) in try json(from: v) }) }
        if let array = value as? [Any?] { return .array(try array.map { v throws(DatabaseError) in try json(from: v) }) }
        throw DatabaseError(code: .invalidData, message: "Cannot store a value of type \(type(of: value))")
    }

    private static func number(_ v: UInt64) -> JSON { v <= UInt64(Int64.max) ? .int(Int64(v)) : .double(Double(v)) }

    private static func finite(_ d: Double) throws(DatabaseError) -> JSON {
        guard d.isFinite else { throw DatabaseError(code: .invalidData, message: "Numbers must be finite") }
        return .double(d)
    }

    /// A node's value in the SDK's shape (priorities dropped).
    static func value(of node: Node) -> Any? {
        node.isEmpty ? nil : value(of: node.toJSON())
    }

    static func value(of json: JSON) -> Any {
        switch json {
        case .null: return NSNull()
        case .bool(let b): return b
        case .int(let i): return NSNumber(value: i)
        case .double(let d): return NSNumber(value: d)
        case .string(let s): return s
        case .array(let a): return a.map { value(of: $0) }
        case .object(let o): return o.mapValues { value(of: $0) }
        }
    }

    static func priorityValue(_ p: Priority?) -> Any? {
        switch p {
        case nil: return nil
        case .number(let d)?: return NSNumber(value: d)
        case .string(let s)?: return s
        }
    }

    /// A priority given to the API: a number, a string or nil.
    static func priorityJSON(_ value: Any?) throws(DatabaseError) -> JSON {
        let j = try json(from: value)
        switch j {
        case .null, .int, .double, .string: return j
        default: throw DatabaseError(code: .invalidData, message: "A priority must be a number, a string or nil")
        }
    }

    /// `value` with `priority` attached, in the export shape the wire and `Node(json:)` accept.
    static func json(value: Any?, priority: Any?) throws(DatabaseError) -> JSON {
        let v = try json(from: value)
        let p = try priorityJSON(priority)
        if case .null = p { return v }
        switch v {
        case .object(var o) where o[".sv"] == nil:
            o[".priority"] = p
            return .object(o)
        case .array(let a):
            var o: [String: JSON] = [:]
            for (i, x) in a.enumerated() where !x.isNull { o[String(i)] = x }
            o[".priority"] = p
            return .object(o)
        case .null: return .null
        default: return .object([".value": v, ".priority": p])
        }
    }
}
