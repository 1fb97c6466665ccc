import EmberCore
import HTTPTypes
import Hummingbird
import NIOCore

/// REST GETs of a location (plain, `format=export`, `print=pretty`, `shallow`, queries) answered from a
/// `ReadStream`: the JSON is written as the store walks its snapshot, one chunk at a time, each
/// written to the socket (and awaited: the client's reading paces the walk) before the next is
/// read. The node's memory per read is about one chunk, whatever the location's size; the
/// snapshot is the one the stream opened (later writes are not in it).
///
/// An answer that fits in the first chunk goes out whole with a Content-Length, as before;
/// a larger one with chunked transfer encoding. ETags come from the snapshot's stored version
/// (`ETag.of(exists:version:)`, the same "v<version>" a whole read gives), so `X-Firebase-ETag` and
/// `If-None-Match` work on streamed reads too. `--max-read-mb` does not limit streamed reads
/// (their memory does not grow with the data); it still bounds listeners' first answers and wire
/// `get`s, which are built whole.
enum StreamedRead {
    /// Bytes of JSON per step of the walk and per socket write; an answer up to this size is
    /// sent whole (Content-Length) like before streaming.
    static let chunkBytes = 256 << 10

    /// Whether a GET is served streamed: data reads, queries included (their children stream
    /// once the store has found their keys), but not a shallow page (`shallowAfter`) or a shallow
    /// query (keys only, paged by their limit).
    static func applies(to req: RestRequest) -> Bool {
        guard case .data = req.target else { return false }
        return req.shallowAfter == nil && !(req.shallow && req.query != nil)
    }

    /// Writes the rest of `stream` to `writer`, one chunk read on the read pool at a time, each
    /// written (and awaited) before the next is read: the client's reading paces the walk.
    static func pump(_ stream: any ReadStream, reads: ReadPool, to writer: inout any ResponseBodyWriter) async throws {
        while !stream.isFinished {
            let chunk = try await reads.run(continuing: true) { try stream.next(maxBytes: chunkBytes) }
            if !chunk.isEmpty { try await writer.write(ByteBuffer(bytes: chunk)) }
        }
    }
}

extension RestHandler {
    /// The streamed answer to a GET that passed the rules, or nil when the store does not stream.
    func streamedResponse(_ req: RestRequest, wantETag: Bool, ifNoneMatch: String?) async throws -> Response? {
        let ns = req.namespace!
        let path = req.path
        let pretty = req.print == .pretty
        let format = TreeJSONFormat(export: req.export, pretty: pretty, shallow: req.shallow)
        let store = self.store
        enum Start: Sendable {
            case notStreamed
            case notModified(String)
            case silent
            case opened(any ReadStream, first: [UInt8])
        }
        let start: Start = try await reads.run {
            guard let s = try store.reader.openReadStream(namespace: ns, path: path, format: format, query: req.query) else { return .notStreamed }
            // A query's answer has no ETag (as when it is read whole): the location's version is
            // not the window's.
            if req.query == nil, let inm = ifNoneMatch, inm == ETag.of(exists: s.exists, version: s.version) {
                s.close()
                return .notModified(inm)
            }
            if req.print == .silent { s.close(); return .silent }
            do { return .opened(s, first: try s.next(maxBytes: StreamedRead.chunkBytes)) } catch {
                s.close()
                throw error
            }
        }
        var headers = RestAnswer.jsonHeaders
        let stream: any ReadStream, first: [UInt8]
        switch start {
        case .notStreamed: return nil
        case .notModified(let etag):
            return RestAnswer.notModified(etag: etag).response
        case .silent: return RestAnswer.noContent().response
        case .opened(let s, let f): (stream, first) = (s, f)
        }
        if req.query == nil && (wantETag || ifNoneMatch != nil) { headers[.eTag] = ETag.of(exists: stream.exists, version: stream.version) }
        if stream.isFinished {
            var bytes = first
            if pretty { bytes.append(0x0A) }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        let reads = self.reads
        let body = ResponseBody { writer in
            defer { stream.close() }
            try await writer.write(ByteBuffer(bytes: first))
            try await StreamedRead.pump(stream, reads: reads, to: &writer)
            if pretty { try await writer.write(ByteBuffer(bytes: [0x0A])) }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }
}
