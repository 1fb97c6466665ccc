import EmberCore
import EmberProtocol

extension WriteValidation {
    /// The front's write limits as the node is configured.
    init(_ config: NodeConfiguration) {
        self.init(maxWriteNodes: config.maxWriteNodes, maxUpdateParts: config.maxUpdateParts)
    }
}
