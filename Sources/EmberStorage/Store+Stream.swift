import EmberCore

extension EmberStore {
    /// A streamed read of the tree at `path` (`TreeStream`): one snapshot, written as JSON in
    /// chunks the caller pulls. Not limited by `maxReadBytes` (its memory does not grow with the
    /// subtree); at most `maxTreeStreams` are open at once (`StorageError.tooManyStreams`).
    /// With `query`, only the children it selects, from the same snapshot: the query's keys are
    /// found first (an index or key range, about 40 bytes per selected child), then each child's
    /// subtree is streamed like any other.
    public func openTreeStream(namespace: String, path: Path, format: TreeJSONFormat, query: QuerySpec? = nil) throws -> TreeStream {
        try KeyCodec.validateNamespace(namespace)
        guard !core.isClosed.load(ordering: .acquiring) else { throw StorageError.closed }
        guard core.streams.admit(limit: options.maxTreeStreams) else {
            throw StorageError.tooManyStreams(limit: options.maxTreeStreams)
        }
        core.visibility.waitForReleased()
        let handle = core.environment.withLock { $0 }
        let select: ((Txn) throws -> QuerySelection)? = query.map { spec in
            { [self] t in try querySelection(t, namespace: namespace, path: path, spec: spec) }
        }
        return try TreeStream(handle: handle, tables: tables, namespace: namespace, path: path, format: format,
                              select: select, registry: core.streams)
    }

    /// Streamed reads open now.
    public var openTreeStreams: Int { core.streams.count }
}
