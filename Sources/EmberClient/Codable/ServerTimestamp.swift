import Foundation

/// Marks an optional `Date` property to be filled with the server's time (FirebaseDatabaseSwift's
/// `@ServerTimestamp`): when the property is nil, writing the value stores
/// `ServerValue.timestamp()` there, which the server replaces by its clock (local events show
/// the client's estimate). A set date is stored as milliseconds since 1970, and that is how the
/// server's timestamps read back, whatever the encoder's date strategy.
///
///     struct Message: Codable {
///         var text: String
///         @ServerTimestamp var sentAt: Date?
///     }
///     try ref.setValue(from: Message(text: "hi"))   // sentAt: the server's time
@propertyWrapper
public struct ServerTimestamp: Codable, Equatable, Hashable, Sendable {
    public var wrappedValue: Date?

    public init(wrappedValue: Date?) { self.wrappedValue = wrappedValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            wrappedValue = nil
        } else {
            wrappedValue = Date(timeIntervalSince1970: try container.decode(Double.self) / 1000)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let date = wrappedValue {
            try container.encode(Int64((date.timeIntervalSince1970 * 1000).rounded()))
        } else {
            try container.encode([".sv": "timestamp"])
        }
    }
}

extension KeyedDecodingContainer {
    /// A `@ServerTimestamp` property whose field is absent (not written yet) reads as nil rather
    /// than failing with `keyNotFound`; synthesized `init(from:)` picks this overload.
    public func decode(_ type: ServerTimestamp.Type, forKey key: Key) throws -> ServerTimestamp {
        try decodeIfPresent(type, forKey: key) ?? ServerTimestamp(wrappedValue: nil)
    }
}
