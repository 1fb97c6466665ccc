/// How a tree is written as JSON by a streamed read (REST `format=export`, `print=pretty`,
/// `shallow`): the storage's walk (`TreeStream`) and the read port (`ReadStream`) share it.
public struct TreeJSONFormat: Sendable, Equatable {
    /// Priorities as `.priority` / `.value` members, never arrays (`Node.exportJSON`).
    public var export: Bool
    public var pretty: Bool
    /// The children's keys only, each `true` (a leaf or nothing: its value).
    public var shallow: Bool

    public init(export: Bool = false, pretty: Bool = false, shallow: Bool = false) {
        self.export = export
        self.pretty = pretty
        self.shallow = shallow
    }
}
