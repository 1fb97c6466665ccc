import CoreMetrics
import EmberCore
import Prometheus
import Synchronization

/// The node's Prometheus metrics (`GET /metrics`), through swift-metrics with a per-node
/// Prometheus factory (no process-global bootstrap, so several nodes can share a test process).
///
/// Write-path cost: client writes update one counter and one latency histogram; committed
/// batches (one callback per LMDB commit) one counter and one size histogram. Everything else —
/// Raft indexes, peer lag and queues, connections, listeners — is read when scraped.
public final class NodeMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let writesOK: CoreMetrics.Counter
    private let writesFailed: CoreMetrics.Counter
    private let commitLatency: CoreMetrics.Timer
    private let committedEntries: CoreMetrics.Counter
    private let batchEntries: CoreMetrics.Recorder
    /// REST requests answered by `RestFastPath` (on the event loop, without Hummingbird).
    private let fastPathRequests: CoreMetrics.Counter
    /// Rejected requests by reason; the reasons are a fixed small set (see `reason(forStatus:)`).
    private let rejected = Mutex<[String: CoreMetrics.Counter]>([:])

    /// Latency buckets (seconds): fsync-bound commits sit between 0.5 ms and tens of ms.
    static let latencyBuckets: [Duration] = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
        .map { Duration.microseconds(Int64($0 * 1_000_000)) }
    static let batchBuckets: [Double] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]

    public init() {
        var f = PrometheusMetricsFactory(registry: registry)
        f.durationHistogramBuckets["ember_commit_latency_seconds"] = Self.latencyBuckets
        f.valueHistogramBuckets["ember_commit_batch_entries"] = Self.batchBuckets
        factory = f
        writesOK = CoreMetrics.Counter(label: "ember_client_writes_total", dimensions: [("result", "ok")], factory: f)
        writesFailed = CoreMetrics.Counter(label: "ember_client_writes_total", dimensions: [("result", "error")], factory: f)
        commitLatency = CoreMetrics.Timer(label: "ember_commit_latency_seconds", dimensions: [], factory: f)
        committedEntries = CoreMetrics.Counter(label: "ember_committed_entries_total", dimensions: [], factory: f)
        batchEntries = CoreMetrics.Recorder(label: "ember_commit_batch_entries", dimensions: [], aggregate: true, factory: f)
        fastPathRequests = CoreMetrics.Counter(label: "ember_rest_fast_path_requests_total", dimensions: [], factory: f)
    }

    func recordFastPathRequest() { fastPathRequests.increment() }

    func recordWrite(since start: ContinuousClock.Instant, ok: Bool) {
        let d = ContinuousClock.now - start
        (ok ? writesOK : writesFailed).increment()
        if ok { commitLatency.recordNanoseconds(d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000) }
    }

    /// One LMDB commit of `entries` log entries (group commit or a Raft apply batch).
    func recordBatch(entries: Int) {
        committedEntries.increment(by: entries)
        batchEntries.record(entries)
    }

    /// Counts a request answered with an error status.
    func recordRejected(status: Int) {
        let reason = Self.reason(forStatus: status)
        let counter = rejected.withLock { m in
            if let c = m[reason] { return c }
            let c = CoreMetrics.Counter(label: "ember_rejected_requests_total", dimensions: [("reason", reason)], factory: factory)
            m[reason] = c
            return c
        }
        counter.increment()
    }

    static func reason(forStatus status: Int) -> String {
        switch status {
        case 400: return "bad_request"
        case 401: return "unauthorized"
        case 403: return "permission_denied"
        case 404: return "not_found"
        case 405: return "method_not_allowed"
        case 412: return "precondition_failed"
        case 413: return "too_large"
        case 429: return "too_many_streams"
        case 503: return "unavailable"
        case 500..<600: return "server_error"
        default: return "client_error"
        }
    }

    /// Prometheus text: the registry's metrics, then the gauges read from the node now.
    func render(probe: NodeProbe, websockets: Int, websocketListens: Int, sseStreams: Int, engine: (any StorageStatsPort)? = nil,
                alarms: (any AlarmPort)? = nil, archive: (any ArchivePort)? = nil) -> String {
        var out = registry.emitToString()
        func gauge(_ name: String, _ help: String, _ values: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
            for v in values { out += "\(name)\(v.labels) \(v.value)\n" }
        }
        func counter(_ name: String, _ help: String, _ values: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
            for v in values { out += "\(name)\(v.labels) \(v.value)\n" }
        }
        // Prometheus' info-metric convention: constant 1, the facts in the labels.
        let buildLabels = BuildInfo.fields.map { f in
            "\(f.name.reduce(into: "") { $0 += $1.isUppercase ? "_" + $1.lowercased() : String($1) })=\"\(f.value)\""
        }.joined(separator: ",")
        gauge("ember_build_info", "This build's version and the storage format and peer protocol levels it reads and writes.",
              [("{\(buildLabels)}", "1")])
        gauge("ember_raft_term", "Current Raft term (0 on a single node).", [("", "\(probe.term)")])
        gauge("ember_raft_commit_index", "Highest log index known committed.", [("", "\(probe.commitIndex)")])
        gauge("ember_raft_applied_index", "Highest log index applied to this node's state.", [("", "\(probe.appliedIndex)")])
        gauge("ember_raft_last_index", "Last index in this node's log.", [("", "\(probe.lastIndex)")])
        gauge("ember_raft_is_leader", "1 on the leader.", [("", probe.role == "leader" ? "1" : "0")])
        gauge("ember_raft_has_leader", "1 when this node knows a leader.", [("", probe.leader == nil ? "0" : "1")])
        let peers = probe.peers.sorted { $0.key < $1.key }
        gauge("ember_peer_lag_entries", "Leader only: entries each follower's log is behind the leader's.",
              peers.compactMap { p in p.value.lagEntries.map { ("{peer=\"\(p.key)\"}", "\($0)") } })
        gauge("ember_peer_commit_lag_entries", "Leader only: committed entries each follower is not known to hold.",
              peers.compactMap { p in p.value.commitLag.map { ("{peer=\"\(p.key)\"}", "\($0)") } })
        gauge("ember_peer_lag_stalled_seconds",
              "Leader only: how long each follower has been behind the commit index without advancing (grows while it is stuck).",
              peers.compactMap { p in p.value.lagStalledSeconds.map { ("{peer=\"\(p.key)\"}", "\($0)") } })
        gauge("ember_peer_connected", "1 while the outbound link to the peer is connected.",
              peers.map { ("{peer=\"\($0.key)\"}", $0.value.connected ? "1" : "0") })
        gauge("ember_peer_outbound_queue_frames", "Frames queued on the outbound link to the peer.",
              peers.map { ("{peer=\"\($0.key)\"}", "\($0.value.queuedFrames)") })
        counter("ember_peer_dropped_frames_total", "Frames dropped because the peer's queue was full.",
                peers.map { ("{peer=\"\($0.key)\"}", "\($0.value.droppedFrames)") })
        gauge("ember_connections", "Open client connections by kind.",
              [("{kind=\"websocket\"}", "\(websockets)"), ("{kind=\"sse\"}", "\(sseStreams)")])
        gauge("ember_listeners", "Active listeners by kind (an SSE stream is one listener).",
              [("{kind=\"websocket\"}", "\(websocketListens)"), ("{kind=\"sse\"}", "\(sseStreams)")])
        if let s = probe.storage {
            gauge("ember_storage_pending_writes", "Writes queued for the storage writer.", [("", "\(s.pendingWrites)")])
            counter("ember_storage_commits_total", "LMDB write transactions committed.", [("", "\(s.commits)")])
            counter("ember_storage_queue_rejections_total", "Writes refused because the writer queue was full.",
                    [("", "\(s.queueRejections)")])
            counter("ember_storage_apply_seconds_total", "Writer time applying entries inside write transactions.",
                    [("", "\(Double(s.transactionNanos) / 1e9)")])
            counter("ember_storage_commit_seconds_total", "Writer time in LMDB commits (page write-out and fsync).",
                    [("", "\(Double(s.commitNanos) / 1e9)")])
            gauge("ember_storage_max_batch_entries", "Largest group-commit batch so far.", [("", "\(s.maxBatchEntries)")])
        }
        if let alarms {
            // Measures again when stale: a scrape sees NOSPACE clear once space is freed.
            _ = alarms.hasRoomForWrites
            let raised = Set(alarms.raised.map(\.kind))
            gauge("ember_alarm", "1 while the alarm is raised: NOSPACE (writes refused), CORRUPT (this member serves no data).",
                  NodeAlarm.Kind.allCases.map { ("{alarm=\"\($0.rawValue)\"}", raised.contains($0) ? "1" : "0") })
            if let room = alarms.room {
                gauge("ember_storage_room_bytes", "Room left for writes: in the map (--max-db-size; growth plus free pages) and on the filesystem.",
                      [("{where=\"map\"}", "\(room.mapBytes)"), ("{where=\"filesystem\"}", "\(room.filesystemBytes)")])
            }
        }
        if let engine {
            // The free list walk is a few pages per thousand free pages: cheap per scrape.
            if let f = try? engine.footprint() {
                gauge("ember_storage_file_bytes", "Size of the data file.", [("", "\(f.fileBytes)")])
                gauge("ember_storage_free_pages", "Pages on LMDB's free list (reused by later writes; a defrag gives them back).",
                      [("", "\(f.freePages)")])
                gauge("ember_storage_free_bytes", "Bytes of the free pages.", [("", "\(f.freeBytes)")])
            }
            gauge("ember_defrag_running", "1 while an online defrag runs.", [("", engine.defragRunning ? "1" : "0")])
            if let d = engine.lastDefrag {
                gauge("ember_defrag_last_finished_timestamp_seconds", "When the last online defrag finished.",
                      [("", "\(Double(d.finishedAtMs) / 1000)")])
                gauge("ember_defrag_last_bytes_before", "Data file size before the last defrag.", [("", "\(d.bytesBefore)")])
                gauge("ember_defrag_last_bytes_after", "Data file size after the last defrag.", [("", "\(d.bytesAfter)")])
                gauge("ember_defrag_last_pause_seconds", "How long the last defrag held writes.", [("", "\(Double(d.pauseNanos) / 1e9)")])
            }
        }
        if let a = Allocator.stats() {
            gauge("ember_allocator_bytes",
                  "jemalloc: bytes allocated, in active pages, resident and mapped (resident above active is freed memory kept for reuse).",
                  [("{kind=\"allocated\"}", "\(a.allocated)"), ("{kind=\"active\"}", "\(a.active)"),
                   ("{kind=\"resident\"}", "\(a.resident)"), ("{kind=\"mapped\"}", "\(a.mapped)")])
        }
        if let n = Allocator.arenas { gauge("ember_allocator_arenas", "jemalloc's arena count (opt.narenas).", [("", "\(n)")]) }
        if let archive { out += Self.archiveMetrics(archive.archiveStatus()) }
        return out
    }

    /// The point-in-time archive's gauges (issue 37).
    static func archiveMetrics(_ a: ArchiveStatus) -> String {
        var out = ""
        func gauge(_ name: String, _ help: String, _ value: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n\(name) \(value)\n"
        }
        gauge("ember_archive_active", "1 while this node writes the point-in-time archive (the leader).", a.active ? "1" : "0")
        gauge("ember_archive_archived_index", "Index through which the archive holds every entry (replicated).", "\(a.archivedThrough)")
        gauge("ember_archive_lag_entries", "Applied entries the archive does not hold yet.", "\(a.lagEntries)")
        gauge("ember_archive_lag_seconds", "Age of the oldest entry the archive does not hold yet (on the node writing it).", "\(a.lagSeconds)")
        gauge("ember_archive_gaps", "Gaps this node found (entries compacted before they were archived).", "\(a.gaps.count)")
        out += "# HELP ember_archive_cpu_seconds_total CPU time of this node's archiver thread (segments, compression, state hashes, bases).\n"
            + "# TYPE ember_archive_cpu_seconds_total counter\nember_archive_cpu_seconds_total \(a.cpuSeconds)\n"
        if let t = a.lastSegmentAtMs {
            gauge("ember_archive_last_segment_timestamp_seconds", "When this node stored its last segment.", "\(Double(t) / 1000)")
        }
        if let t = a.lastBaseAtMs {
            gauge("ember_archive_last_base_timestamp_seconds", "When this node stored its last base snapshot.", "\(Double(t) / 1000)")
        }
        if let t = a.windowStartMs {
            gauge("ember_archive_window_start_timestamp_seconds", "The oldest time a restore can reach.", "\(Double(t) / 1000)")
        }
        return out
    }
}
