import Hummingbird
import NIOCore

/// Request context that keeps the connection's channel, so a stream that must end abruptly (a
/// slow SSE reader with a gap) can close its connection instead of leaving it open.
public struct EmberRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}
