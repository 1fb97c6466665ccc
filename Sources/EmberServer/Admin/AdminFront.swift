import EmberCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// The operations endpoints in front of the Firebase REST handler:
///
/// - `GET /healthz`: the process answers (liveness).
/// - `GET /readyz`: 200 when this node knows a leader, caught up with its cluster since it
///   started (`NodeCatchUp`) and has applied within `readyMaxLagEntries` of the commit index;
///   503 with the reason otherwise.
/// - `GET /metrics`: Prometheus text.
/// - `GET /.ember/status`: the node's Raft view plus connections, listeners and client URLs.
/// - `GET /.ember/backup` (admin): a consistent snapshot of the whole state as a backup file.
/// - `POST /.ember/defrag` (admin): rewrites this node's data file compactly while it runs
///   (the admin `DefragPort`); member-local on a cluster member.
/// - `POST /.ember/check/hashes` (admin): the corruption check now: this member's state hash
///   against its voters' at one applied index (`ClusterControl.checkHashes`).
///
/// Everything else goes to `RestHandler`; error answers are counted by reason for `/metrics`.
final class AdminFront: Sendable {
    let rest: RestHandler
    let store: NodePorts
    let hub: StreamHub
    let realtime: RealtimeHub
    let metrics: NodeMetrics
    let config: NodeConfiguration
    let logger: Logger
    /// Whether this node caught up with its cluster since it started (readiness, status).
    let catchUp: NodeCatchUp
    private let backupsRunning = Atomic<Int>(0)

    init(rest: RestHandler, store: NodePorts, hub: StreamHub, realtime: RealtimeHub, metrics: NodeMetrics,
         config: NodeConfiguration, logger: Logger, catchUp: NodeCatchUp = .caughtUp()) {
        self.catchUp = catchUp
        self.rest = rest
        self.store = store
        self.hub = hub
        self.realtime = realtime
        self.metrics = metrics
        self.config = config
        self.logger = logger
    }

    func respond(to request: Request, channel: (any Channel)?) async -> Response {
        let response: Response
        // Only with --tls-ca: otherwise no certificate is read and this is anonymous.
        let base = await ClientCertificate.baseIdentity(of: channel, config: config)
        do {
            if let r = try await route(request, channel: channel, base: base) {
                response = r
            } else {
                response = await rest.respond(to: request, channel: channel, base: base)
            }
        } catch let e as RestError {
            response = RestHandler.error(e)
        } catch {
            response = RestHandler.error(RestError(500, "Internal error: \(error)"))
        }
        if response.status.code >= 400 { metrics.recordRejected(status: response.status.code) }
        return response
    }

    /// nil: not an operations endpoint.
    func route(_ request: Request, channel: (any Channel)?, base: Identity = .anonymous) async throws -> Response? {
        let path = request.uri.path
        if ConsoleFront.handles(path) {
            let ops = config.operations
            // Members and learners added since start (the directory's client URLs) too: the
            // cluster panel polls each one's status.
            let urls = Array(ops.memberURLs.values) + ops.handshakeClientURLs(directory: store.admin.status.memberDirectory)
                + [ops.advertisedURL].compactMap { $0 }
            return try ConsoleFront.respond(to: request, enabled: ops.console, memberOrigins: ConsoleFront.origins(of: urls))
        }
        guard path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/.ember/status"
            || path == "/.ember/backup" || path == "/.ember/defrag" || path == Self.checkHashesPath else { return nil }
        if path == Self.checkHashesPath {
            guard request.method == .post else { throw RestError(405, "Method \(request.method) is not supported on \(path); use POST") }
            try requireAdmin(request, channel: channel, base: base)
            guard let cluster = store.admin.cluster else {
                throw RestError(404, "This node is not part of a cluster: there is no other copy to compare its state hash with")
            }
            guard let verdict = await cluster.checkHashes() else { throw RestError(503, "The state hash could not be computed") }
            return RestHandler.json(verdict, pretty: false)
        }
        if path == "/.ember/defrag" {
            guard request.method == .post else { throw RestError(405, "Method \(request.method) is not supported on \(path); use POST") }
            try requireAdmin(request, channel: channel, base: base)
            return try await defrag()
        }
        guard request.method == .get else {
            throw RestError(405, "Method \(request.method) is not supported on \(path)")
        }
        switch path {
        case "/healthz":
            return RestHandler.json(.object(["status": .string("ok")]), pretty: false)
        case "/readyz":
            return readiness()
        case "/metrics":
            let text = metrics.render(probe: NodeProbe.read(store), websockets: realtime.connectionCount,
                                      websocketListens: realtime.listenCount, sseStreams: hub.count,
                                      engine: store.admin.storage, alarms: store.admin.alarms, archive: store.admin.archive)
                + rest.triggerMetricsText()
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
        case "/.ember/status":
            return RestHandler.json(try await status(), pretty: false)
        default:
            try requireAdmin(request, channel: channel, base: base)
            return try await backup()
        }
    }

    static let checkHashesPath = "/.ember/check/hashes"

    // MARK: - Readiness and status

    func readiness() -> Response {
        let p = NodeProbe.read(store)
        var reasons: [String] = []
        if p.leader == nil { reasons.append("no leader known") }
        if !catchUp.isCaughtUp { reasons.append("catching up: not yet applied what the cluster had committed when this node started") }
        if let corrupt = store.admin.alarms?.raised.first(where: { $0.kind == .corrupt }) { reasons.append("CORRUPT alarm: \(corrupt.message)") }
        let lag = p.commitIndex > p.appliedIndex ? p.commitIndex - p.appliedIndex : 0
        if lag > config.operations.readyMaxLagEntries {
            reasons.append("applied index \(p.appliedIndex) trails commit index \(p.commitIndex) by \(lag) entries")
        }
        let body: JSON = .object([
            "ready": .bool(reasons.isEmpty), "leader": p.leader.map { .string($0) } ?? .null, "caughtUp": .bool(catchUp.isCaughtUp),
            "commitIndex": .int(Int64(p.commitIndex)), "appliedIndex": .int(Int64(p.appliedIndex)),
            "reason": reasons.isEmpty ? .null : .string(reasons.joined(separator: "; ")),
        ])
        return RestHandler.json(body, pretty: false, status: reasons.isEmpty ? .ok : .serviceUnavailable)
    }

    func status() async throws -> JSON {
        guard case .object(var s) = try await store.admin.status.nodeStatus() else { throw RestError(500, "bad status") }
        s["streams"] = .int(Int64(hub.count))
        s["connections"] = .int(Int64(realtime.connectionCount + hub.count))
        s["listeners"] = .int(Int64(realtime.listenCount + hub.count))
        s["slowConsumerDisconnects"] = .int(Int64(realtime.slowConsumerCutOffs.count.load(ordering: .relaxed)
                                                   + hub.overflowClosures.load(ordering: .relaxed)))
        s["fanoutBacklog"] = .int(Int64(realtime.feed?.backlog ?? 0))
        s["allocator"] = .string(Allocator.name)
        // Client reads are held until this is true (docs/CLUSTER.md); then it stays true.
        s["caughtUp"] = .bool(catchUp.isCaughtUp)
        s["catchUpHeld"] = .int(Int64(catchUp.heldCount))
        // Which build answers, and the levels it reads and writes (deploy/OPERATIONS.md).
        s["build"] = .object(KeyMap(uniqueKeysWithValues: [("version", JSON.string(BuildInfo.version))]
            + BuildInfo.levels.map { ($0.name, JSON.int(Int64($0.value))) }))
        let ops = config.operations
        let ownID: String
        if case .string(let id)? = s["id"] { ownID = id } else { ownID = "single" }
        let ownURL = ops.advertisedURL ?? ops.memberURLs[ownID] ?? "http://\(config.host):\(config.port)"
        s["clientURL"] = .string(ownURL)
        var members = ops.memberURLs
        members[ownID] = ownURL
        // Members added at run time (learners too) with a client URL: `ember status` finds them.
        if case .object(let directory)? = s["members"] {
            for id in directory.keys where members[id] == nil {
                if case .object(let m)? = directory[id], case .string(let url)? = m["url"] { members[id] = url }
            }
        }
        s["clientURLs"] = .object(KeyMap(members.mapValues { JSON.string($0) }))
        // Bytes per table, free pages and the file (a few mdb_stat calls and the free list).
        if let alarms = store.admin.alarms {
            _ = alarms.hasRoomForWrites  // measures again when stale: NOSPACE clears once space is freed
            s["alarms"] = .array(alarms.raised.map { a in
                .object(["alarm": .string(a.kind.rawValue), "message": .string(a.message), "since": .int(a.since)])
            })
        }
        if let storage = store.admin.storage {
            guard case .object(var fp) = try storage.footprint().json else { throw RestError(500, "bad footprint") }
            if let room = store.admin.alarms?.room {
                fp["roomBytes"] = .object(["map": .int(Int64(room.mapBytes)), "filesystem": .int(Int64(room.filesystemBytes)),
                                           "reserve": .int(Int64(room.reserveBytes))])
            }
            fp["defragRunning"] = .bool(storage.defragRunning)
            fp["lastDefrag"] = storage.lastDefrag?.json ?? .null
            s["storage"] = .object(fp)
        }
        // Which incarnation holds each node's sessions, and sessions whose writes wait to run.
        let book = store.onDisconnect
        let pending = try book.sessions(limit: Self.maxCountedOnDisconnectSessions) { _, _, _, _ in true }.count
        s["onDisconnect"] = .object([
            "holders": .object(KeyMap(try book.holders().mapValues { JSON.string($0) })),
            "pendingSessions": .int(Int64(pending)),
        ])
        if let t = rest.triggerStatus() { s["triggers"] = t }
        return .object(s)
    }

    /// Sessions with pending onDisconnect writes counted for the status at most (a larger
    /// count shows as this number).
    static let maxCountedOnDisconnectSessions = 100_000

    // MARK: - Admin

    /// Admin endpoints take `Authorization: Bearer <token>`; the token must resolve to the admin
    /// identity through the node's token verifier. An admin client certificate (`base`) is enough.
    func requireAdmin(_ request: Request, channel: (any Channel)?, base: Identity = .anonymous) throws {
        if base.isAdmin { return }
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw RestError(401, "This endpoint needs an admin token: Authorization: Bearer <token>")
        }
        let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        let address = channel?.remoteAddress?.ipAddress
        let identity: Identity
        do { identity = try config.tokenVerifier.identity(for: token, address: address, now: RestHandler.wallClockMillis()) }
        catch { throw RestError(401, error.message) }
        guard identity.isAdmin else { throw RestError(401, "This endpoint needs an admin identity") }
    }

    // MARK: - Defrag

    /// Runs an online defrag of this node's data file; answers its report, 507 with the bytes
    /// needed and available when the filesystem lacks room, 409 while another one runs.
    func defrag() async throws -> Response {
        guard let defrag = store.admin.defrag else { throw RestError(501, "This store cannot be defragmented") }
        do {
            let report = try await defrag.defrag()
            logger.info("defrag done", metadata: ["bytesBefore": "\(report.bytesBefore)", "bytesAfter": "\(report.bytesAfter)",
                                                  "pauseMs": "\(Double(report.pauseNanos) / 1e6)"])
            return RestHandler.json(report.json, pretty: false)
        } catch let e as DefragRefusal {
            logger.warning("defrag refused", metadata: ["reason": "\(e)"])
            switch e {
            case .insufficientSpace(let needed, let available, _):
                return RestHandler.json(.object(["error": .string(e.description), "neededBytes": .int(Int64(needed)),
                                                 "availableBytes": .int(Int64(available))]),
                                        pretty: false, status: .init(code: 507))
            case .busy: throw RestError(409, e.description)
            case .gaveUp: throw RestError(503, e.description)
            }
        }
    }

    // MARK: - Backup

    /// Writes the snapshot to a temporary file next to the data (on its own thread: a large
    /// state takes a while and must not hold a cooperative thread), then streams that file.
    func backup() async throws -> Response {
        guard let backup = store.admin.backup else { throw RestError(501, "This store has no backups") }
        guard backupsRunning.add(1, ordering: .relaxed).newValue <= config.operations.maxConcurrentBackups else {
            backupsRunning.subtract(1, ordering: .relaxed)
            throw RestError(503, "A backup is already running on this node; retry when it is done")
        }
        let file = (config.dataDirectory as NSString).appendingPathComponent(".backup-\(UUID().uuidString).ember")
        let summary: BackupResult
        do {
            summary = try await withCheckedThrowingContinuation { cont in
                Thread.detachNewThread {
                    do { cont.resume(returning: try backup.writeBackup(to: file)) } catch {
                        cont.resume(throwing: error)
                    }
                }
            }
        } catch {
            backupsRunning.subtract(1, ordering: .relaxed)
            throw RestError(500, "Backup failed: \(error)")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        guard let handle = FileHandle(forReadingAtPath: file) else {
            backupsRunning.subtract(1, ordering: .relaxed)
            throw RestError(500, "Backup file vanished")
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/octet-stream"
        headers[.contentLength] = "\(size)"
        headers[HTTPField.Name("X-Ember-Applied-Index")!] = "\(summary.appliedIndex)"
        logger.info("backup streaming", metadata: ["appliedIndex": "\(summary.appliedIndex)", "bytes": "\(size)"])
        let body = ResponseBody { [self] writer in
            defer {
                try? handle.close()
                try? FileManager.default.removeItem(atPath: file)
                self.backupsRunning.subtract(1, ordering: .relaxed)
            }
            while let data = try handle.read(upToCount: 1 << 20), !data.isEmpty {
                try await writer.write(ByteBuffer(bytes: data))
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }
}
