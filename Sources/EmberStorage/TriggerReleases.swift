import EmberCore
import Synchronization

/// The change records of an apply whose results went out before its transaction committed
/// (`EmberStore.performReleasing`), kept in memory until that commit, so a delivery lane need
/// not wait for it (`EmberStore.triggerDeliveryRead`). A Raft host answers writes and feeds
/// listeners from such results while the writer syncs (`Visibility`): the entries are committed
/// in a majority's log and the apply is deterministic. A lane that read only what LMDB shows
/// waited for that sync — the apply's own commit, queued behind whatever the writer was doing
/// — on every event: a third of the commit → receiver latency of an idle cluster.
///
/// A lane reads the committed state without waiting plus these records, which is exactly what
/// it would read after the commit, as long as the pending releases changed nothing else it
/// reads: every entry that may (definitions, pause and resume, settles, replays, an
/// onDisconnect run, a write past its group's headroom, a record this class was not given)
/// marks its namespace `whole`, and the lanes of that namespace wait as before. Cursor moves
/// (`advance`) do not: a lane skips what it delivered itself (`floor`).
final class TriggerReleases: Sendable {
    struct Record: Sendable {
        let namespace: String
        let group: UInt64
        let index: UInt64
        let events: [TriggerEvent]
    }

    fileprivate struct Release {
        let seq: UInt64
        let records: [Record]
        let whole: Set<String>
    }

    private struct State {
        /// Releases not known to be committed, oldest first (one at a time in practice: a
        /// release commits before the writer's next transaction begins).
        var pending: [Release] = []
        /// The highest release registered: a later one nobody registered (an apply this class
        /// does not follow) makes every lane wait.
        var covered: UInt64 = 0
    }

    /// Named limit: records kept per release (a bigger apply's namespaces wait as before).
    static let maxRecords = 4_096

    private let state = Mutex(State())
    /// A lane read through this class once: until then the writer collects nothing (a node
    /// that never delivered pays no bookkeeping per write).
    private let used = Atomic<Bool>(false)

    var active: Bool { used.load(ordering: .relaxed) }

    /// Registers release `seq` (writer thread, after the apply, before its results are
    /// published): `records` the records the apply wrote in order (nil: not collected), checked
    /// against what each result says it reached.
    func add(seq: UInt64, results: [WriteResult], records: [Record]?) {
        var whole = Set<String>()
        var kept = records ?? []
        if kept.count > Self.maxRecords {
            for r in kept { whole.insert(r.namespace) }
            kept = []
        }
        // Both in log order: a result's group records are found by walking, not hashed.
        var k = 0
        for r in results {
            switch r.triggerReach {
            case .none, .cursors:
                continue
            case .namespace:
                whole.insert(r.namespace)
            case .group(let g):
                while k < kept.count && kept[k].index < r.index { k += 1 }
                var found = false
                var j = k
                while j < kept.count && kept[j].index == r.index {
                    if kept[j].group == g && kept[j].namespace == r.namespace { found = true }
                    j += 1
                }
                if !found { whole.insert(r.namespace) }
            }
        }
        if !whole.isEmpty { kept.removeAll { whole.contains($0.namespace) } }
        state.withLock { s in
            s.covered = max(s.covered, seq)
            if !kept.isEmpty || !whole.isEmpty { s.pending.append(Release(seq: seq, records: kept, whole: whole)) }
        }
    }

    /// Release `seq` committed (writer thread): its records are in LMDB now. Returns them, in
    /// log order, for the lanes' decoded records (`TriggerRecordCache.insert`): they are
    /// exactly what a lane would decode from LMDB (a record that any apply of the release
    /// rewrote, or that was not collected, marked its namespace whole and is not among them).
    @discardableResult
    func committed(through seq: UInt64) -> [Record] {
        state.withLock { s in
            guard !s.pending.isEmpty else { return [] }
            var done: [Record] = []
            for r in s.pending where r.seq <= seq { done += r.records }
            s.pending.removeAll { $0.seq <= seq }
            return done
        }
    }

    /// The pending records a lane of `namespace` may add to its read, read in place from the
    /// releases (shared with every other lane's view: ten lanes each copying the records of
    /// every pending release was a share of a busy leader's delivery cost).
    struct View {
        fileprivate var releases: [Release] = []
        fileprivate var visible: UInt64 = 0
        var namespace = ""

        /// Whether any record is pending at all.
        var hasRecords: Bool { releases.contains { $0.seq > visible && !$0.records.isEmpty } }

        /// Calls `body` with the pending records of `group` in the view's namespace, in log
        /// order, until it returns false.
        func forEach(group: UInt64, _ body: (Record) -> Bool) {
            for r in releases where r.seq > visible {
                for rec in r.records where rec.group == group && rec.namespace == namespace {
                    if !body(rec) { return }
                }
            }
        }
    }

    /// What a lane of `ns` adds to a read of the committed state that does not wait: the
    /// pending records of `ns` in log order; nil when it must wait (a pending release changed
    /// more of `ns`, or one was not registered). Taken before that read begins: a release
    /// committed in between is in both, and the lane's read keeps one copy.
    func view(_ ns: String, _ visibility: Visibility) -> View? {
        if !used.load(ordering: .relaxed) { used.store(true, ordering: .relaxed) }
        let (pending, covered) = state.withLock { ($0.pending, $0.covered) }
        let (visible, released) = visibility.counts
        guard released > visible else { return View() }
        guard covered >= released else { return nil }
        for r in pending where r.seq > visible && r.whole.contains(ns) { return nil }
        return View(releases: pending, visible: visible, namespace: ns)
    }
}
