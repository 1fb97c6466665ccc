import EmberCore

extension EmberStore {
    /// A streamed read of the tree at `path` (`TreeStream`): one snapshot, written as JSON in
    /// chunks the caller pulls. Not limited by `maxReadBytes` (its memory does not grow with the
    /// subtree); at most `maxTreeStreams` are open at once (`StorageError.tooManyStreams`).
    public func openTreeStream(namespace: String, path: Path, format: TreeJSONFormat) throws -> TreeStream {
        try KeyCodec.validateNamespace(namespace)
        guard !core.isClosed.load(ordering: .acquiring) else { throw StorageError.closed }
        guard core.streams.admit(limit: options.maxTreeStreams) else {
            throw StorageError.tooManyStreams(limit: options.maxTreeStreams)
        }
        core.visibility.waitForReleased()
        let handle = core.environment.withLock { $0 }
        return try TreeStream(handle: handle, tables: tables, namespace: namespace, path: path, format: format,
                              registry: core.streams)
    }

    /// Streamed reads open now.
    public var openTreeStreams: Int { core.streams.count }
}
