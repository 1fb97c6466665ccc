import EmberCore
import EmberStorage

/// A location's JSON read from one snapshot and handed out in chunks as the caller asks for them
/// (`ReadPort.openReadStream`): its memory does not grow with the data. The caller pulls one
/// chunk at a time (never two calls at once; any thread) and closes it when done or abandoned.
public protocol ReadStream: AnyObject, Sendable {
    /// The location's version in the snapshot and whether it holds data: its ETag without
    /// reading it (the REST front's `ETag.of(exists:version:)`).
    var version: UInt64 { get }
    var exists: Bool { get }
    /// The snapshot's applied index (a stream's first event, then the changes after it).
    var appliedIndex: UInt64 { get }
    /// True once every byte was handed out.
    var isFinished: Bool { get }
    /// The next bytes: about `maxBytes` (plus at most one stored value), or the rest.
    func next(maxBytes: Int) throws -> [UInt8]
    func close()
}

/// The LMDB store's `TreeStream` as a `ReadStream`, its errors as the store's.
final class LMDBReadStream: ReadStream {
    let inner: TreeStream

    init(_ inner: TreeStream) { self.inner = inner }

    var version: UInt64 { inner.version }
    var exists: Bool { inner.exists }
    var appliedIndex: UInt64 { inner.appliedIndex }
    var isFinished: Bool { inner.isFinished }
    func next(maxBytes: Int) throws -> [UInt8] {
        do { return try inner.next(maxBytes: maxBytes) } catch let e as StorageError { throw LMDBTranslation.translate(e) }
    }
    func close() { inner.close() }
}

extension LMDBReads {
    public func openReadStream(namespace: String, path: Path, format: TreeJSONFormat, query: QuerySpec?) throws -> (any ReadStream)? {
        try refuseReserved(namespace)
        return LMDBReadStream(try LMDBTranslation.translating {
            try store.openTreeStream(namespace: namespace, path: path, format: format, query: query)
        })
    }
}
