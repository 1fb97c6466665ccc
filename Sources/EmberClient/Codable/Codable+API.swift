import EmberCore
import Foundation

extension DatabaseReference {
    /// Encodes `value` and writes it here, replacing what is there (FirebaseDatabaseSwift's
    /// `setValue(from:encoder:completion:)`). Encoding errors are thrown; the completion gets
    /// the write's result once the server acknowledged it (not while offline). The SDK has no
    /// async form of this method; await `setValue(_:)` with `encoder.encode(value)` for one.
    public func setValue<T: Encodable>(from value: T, encoder: Database.Encoder = Database.Encoder(),
                                       completion: (@Sendable ((any Error)?) -> Void)? = nil) throws {
        let json = try encoder.encodeJSON(value)
        if let completion {
            setValue(json, withCompletionBlock: { error, _ in completion(error) })
        } else {
            setValue(json)
        }
    }
}

extension DataSnapshot {
    /// The snapshot's value decoded as `type` (FirebaseDatabaseSwift's `data(as:decoder:)`).
    /// Throws `DecodingError.valueNotFound` when there is no data and `T` is not optional.
    public func data<T: Decodable>(as type: T.Type, decoder: Database.Decoder = Database.Decoder()) throws -> T {
        try decoder.decode(type, fromJSON: node.toJSON())
    }
}

extension MutableData {
    /// The transaction's current value decoded as `type` (an Ember addition: the SDK has no
    /// Codable support on `MutableData`).
    public func data<T: Decodable>(as type: T.Type, decoder: Database.Decoder = Database.Decoder()) throws -> T {
        try decoder.decode(type, fromJSON: currentNode.toJSON())
    }

    /// Sets the transaction's value to `value` encoded (an Ember addition, see `data(as:)`).
    public func setValue<T: Encodable>(from value: T, encoder: Database.Encoder = Database.Encoder()) throws {
        self.value = try encoder.encodeJSON(value)
    }
}
