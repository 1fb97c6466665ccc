import EmberCore

/// REST ETags are the front's: made of the version the store returns with a value ("v<version>",
/// `null_etag` for no data), and read back from `if-match` as the version the write expects.
/// Opaque to clients; the store compares versions when the write is applied.
enum ETag {
    static let null = "null_etag"

    static func of(node: Node, version: UInt64) -> String {
        of(exists: !node.isEmpty, version: version)
    }

    /// The same from a streamed read, which knows whether there is data without reading it.
    static func of(exists: Bool, version: UInt64) -> String {
        exists ? "v\(version)" : null
    }

    /// `if-match` as a write condition. Text that is no ETag of ours names no version data can
    /// have (`UInt64.max`): the write fails with 412 and the current ETag, as for a stale one.
    static func condition(ifMatch text: String) -> WriteCondition {
        if text == null { return .dataVersion(nil) }
        let digits = text.dropFirst()
        // Only the text `of` makes: "v007" is not "v7".
        guard text.first == "v", let v = UInt64(digits), String(v) == digits else { return .dataVersion(.max) }
        return .dataVersion(v)
    }
}
