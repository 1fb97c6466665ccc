/// Errors raised by the pure model. Each case carries enough to produce Firebase's client-facing text.
public enum EmberError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidJSON(String)
    case invalidKey(key: String, reason: String)
    case pathTooDeep(depth: Int)
    case keyTooLong(bytes: Int)
    case stringTooLong(bytes: Int)
    case invalidPriority(String)
    case invalidValueKey            // `.value` mixed with ordinary children
    case unrecognizedServerValue(String)
    case invalidData(String)
    case invalidQuery(String)
    case tooLarge(String)

    public var description: String {
        switch self {
        case .invalidJSON:
            return "Invalid data; couldn't parse JSON object, array, or value."
        case .invalidKey(let key, let reason):
            return "Invalid key \"\(key.prefix(100))\": \(reason)"
        case .pathTooDeep(let depth):
            return "Path is \(depth) levels deep; the maximum is \(Limits.maxPathDepth)"
        case .keyTooLong(let bytes):
            return "Key is \(bytes) bytes long; the maximum is \(Limits.maxKeyBytes) bytes"
        case .stringTooLong(let bytes):
            return "String value is \(bytes) bytes long; the maximum is \(Limits.maxStringBytes) bytes"
        case .invalidPriority(let why):
            return "Invalid priority: \(why)"
        case .invalidValueKey:
            return "Invalid data; .value cannot be combined with other children"
        case .unrecognizedServerValue(let what):
            return "The request contains an unrecognized server value: \(what)"
        case .invalidData(let why):
            return "Invalid data; \(why)"
        case .invalidQuery(let why):
            return why
        case .tooLarge(let why):
            return why
        }
    }
}

/// Firebase's documented data limits (docs/database/usage/limits).
public enum Limits {
    /// "each path must be less than 32 levels deep"
    public static let maxPathDepth = 32
    /// Keys are at most 768 bytes of UTF-8.
    public static let maxKeyBytes = 768
    /// String values are at most 10 MB of UTF-8.
    public static let maxStringBytes = 10 * 1024 * 1024
    /// Nesting bound of the JSON parser: the data depth limit plus room for `.value`/`.sv` wrappers.
    public static let maxJSONDepth = 64
}
