import Logging

/// The HTTP server's log handler: Hummingbird sets a request id on its logger for every request,
/// and `StreamLogHandler` formats its whole metadata text on every such change (~2 % of a REST
/// write's CPU in a profile). This one keeps added metadata aside and hands it to the wrapped
/// handler only with a message actually logged (rare at the default level).
struct DeferredMetadataLogHandler: LogHandler {
    var inner: any LogHandler
    /// Set through this handler, on top of `inner`'s own metadata.
    var added: Logger.Metadata = [:]

    init(_ inner: any LogHandler) { self.inner = inner }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata.merging(added) { $1 } }
        set {
            added = newValue
            inner.metadata = [:]
        }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { added[key] ?? inner[metadataKey: key] }
        set { added[key] = newValue }
    }

    func log(event: LogEvent) {
        guard !added.isEmpty else { return inner.log(event: event) }
        var e = event
        e.metadata = event.metadata.map { added.merging($0) { $1 } } ?? added
        inner.log(event: e)
    }
}

extension Logger {
    /// This logger with metadata changes deferred (see `DeferredMetadataLogHandler`).
    func deferringMetadata() -> Logger {
        var l = self
        l.handler = DeferredMetadataLogHandler(handler)
        return l
    }
}
