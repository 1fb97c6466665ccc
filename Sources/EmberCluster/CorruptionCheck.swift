import Dispatch
import EmberCore
import EmberNodeStore
import EmberRaft
import EmberStorage
import Foundation
import Logging
import Synchronization

/// etcd's corrupt check: members compare their state hashes at the same applied index, and a
/// member whose hash disagrees with a majority's raises the CORRUPT alarm on itself (it then
/// serves no client: `AlarmGate`). Every member judges only itself, from the hashes its peers
/// report, so no alarm has to be sent anywhere.
///
/// - Each member keeps its own recent (applied index, hash) pairs, each computed from ONE read
///   transaction (`EmberStore.stateHashAtApplied`), and the last few its peers reported.
/// - A round (every `interval`, and on demand: `POST /.ember/check/hashes`) hashes this member's
///   state and sends it to every voter, asking for theirs at that index. An asked member waits
///   up to `answerWaitSeconds` for its applied index to reach it, then answers with its own pair
///   (at that index when it got there exactly, else at its own: compared only where indexes meet).
///   An idle cluster always meets; under steady writes a round may find no common index
///   (inconclusive) and the next one tries again.
/// - Judgement at an index both sides hold: a hash held by a majority of the voters is right; a
///   member holding another raises CORRUPT. With every voter heard and no majority, each raises it.
///
/// Off the Raft driver: frames arrive from the transport's handler, hashes are computed on one
/// serial queue (a full scan of the tree: seconds for a large state).
final class CorruptionCheck: Sendable {
    /// Pairs kept per member (own and each peer's), newest last.
    static let keptPairs = 16
    /// How long an asked member waits for its applied index to reach the asker's.
    static let answerWaitSeconds = 2.0
    /// Answers computed at once at most (each may wait and hash); further asks are dropped.
    static let maxAnswering = 8
    /// How long an on-demand check waits for every voter's answer.
    static let onDemandWaitSeconds = 5.0
    /// A periodic check's first round after start: soon, so a restarted member with a damaged
    /// data file finds out before long (the interval may be minutes).
    static let firstRoundSeconds = 2.0
    /// Disagreements remembered as logged (then forgotten, and logged again).
    static let maxLogged = 1_024

    struct Pair: Sendable, Equatable {
        var index: UInt64
        var hash: String
    }

    /// What a round or an incoming report concluded at one index.
    struct Verdict: Sendable {
        var index: UInt64
        var hash: String
        /// Voters' hashes at `index` (this member's included).
        var hashes: [NodeID: String]
        var voters: [NodeID]
        /// A majority agreed on one hash (or every voter answered).
        var conclusive: Bool
        /// This member holds a minority hash.
        var corrupt: Bool
    }

    private struct State {
        var own: [Pair] = []
        var peers: [NodeID: [Pair]] = [:]
        var answering = 0
        var last: Verdict?
        /// Peers already logged as disagreeing, per index (each is logged once).
        var logged: Set<String> = []
    }

    let store: EmberStore
    let selfID: NodeID
    let interval: Duration?
    let voters: @Sendable () -> [NodeID]
    let send: @Sendable (HashCheck, NodeID) -> Void
    let logger: Logger
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "ember-corruption-check")
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(store: EmberStore, selfID: NodeID, interval: Duration?, logger: Logger,
         voters: @escaping @Sendable () -> [NodeID], send: @escaping @Sendable (HashCheck, NodeID) -> Void) {
        self.store = store
        self.selfID = selfID
        self.interval = interval
        self.logger = logger
        self.voters = voters
        self.send = send
    }

    func start() {
        guard let interval else { return }
        let first = min(interval, .milliseconds(Int64(Self.firstRoundSeconds * 1000)))
        loop.withLock { $0 = Task { [weak self] in
            var wait = first
            while !Task.isCancelled {
                do { try await Task.sleep(for: wait) } catch { return }
                guard let self else { return }
                _ = await self.round()
                wait = interval
            }
        } }
    }

    func stop() {
        loop.withLock { $0?.cancel(); $0 = nil }
    }

    var lastVerdict: Verdict? { state.withLock { $0.last } }

    // MARK: - Rounds

    /// Hashes this member's state, asks every other voter for theirs at that index, and judges
    /// what has arrived so far (answers are judged as they come).
    @discardableResult
    func round() async -> Pair? {
        guard let mine = await ownPair() else { return nil }
        for peer in voters() where peer != selfID {
            send(HashCheck(from: selfID, appliedIndex: mine.index, stateHash: mine.hash, ask: true), peer)
        }
        judge(at: mine.index)
        return mine
    }

    /// On demand: a round, then up to `onDemandWaitSeconds` for every voter's hash at its index.
    func check() async -> Verdict? {
        guard let mine = await round() else { return nil }
        let deadline = ContinuousClock.now + .milliseconds(Int64(Self.onDemandWaitSeconds * 1000))
        while ContinuousClock.now < deadline {
            let members = voters()
            let heard = state.withLock { s in members.filter { $0 == selfID || s.peers[$0]?.contains { $0.index == mine.index } == true } }
            if heard.count == members.count { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return judge(at: mine.index)
    }

    /// A peer's report (from the transport's handler).
    func receive(_ report: HashCheck) {
        let pair = Pair(index: report.appliedIndex, hash: report.stateHash)
        state.withLock { s in
            var kept = s.peers[report.from, default: []]
            if !kept.contains(pair) { kept.append(pair) }
            if kept.count > Self.keptPairs { kept.removeFirst(kept.count - Self.keptPairs) }
            s.peers[report.from] = kept
        }
        judge(at: report.appliedIndex)
        guard report.ask else { return }
        let admitted = state.withLock { s -> Bool in
            guard s.answering < Self.maxAnswering else { return false }
            s.answering += 1
            return true
        }
        guard admitted else { return }
        Task {
            defer { state.withLock { $0.answering -= 1 } }
            let deadline = ContinuousClock.now + .milliseconds(Int64(Self.answerWaitSeconds * 1000))
            while store.appliedIndex < report.appliedIndex && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
            guard let mine = await ownPair() else { return }
            send(HashCheck(from: selfID, appliedIndex: mine.index, stateHash: mine.hash, ask: false), report.from)
            judge(at: mine.index)
        }
    }

    /// This member's (applied index, hash) now; the last pair while the applied index has not moved.
    private func ownPair() async -> Pair? {
        if let last = state.withLock({ $0.own.last }), last.index == store.appliedIndex { return last }
        let store = self.store
        let computed: Pair? = await withCheckedContinuation { done in
            queue.async {
                done.resume(returning: (try? store.stateHashAtApplied()).map { Pair(index: $0.applied, hash: $0.hash) })
            }
        }
        guard let pair = computed else { return nil }
        state.withLock { s in
            if !s.own.contains(pair) { s.own.append(pair) }
            if s.own.count > Self.keptPairs { s.own.removeFirst(s.own.count - Self.keptPairs) }
        }
        return pair
    }

    // MARK: - Judgement

    /// Judges this member at `index` from the hashes held there; raises CORRUPT on a minority hash.
    @discardableResult
    func judge(at index: UInt64) -> Verdict? {
        let members = voters()
        guard members.contains(selfID) else { return nil }  // a joining node has no say yet
        let (mine, hashes) = state.withLock { s -> (String?, [NodeID: String]) in
            var h: [NodeID: String] = [:]
            for m in members where m != selfID {
                if let p = s.peers[m]?.last(where: { $0.index == index }) { h[m] = p.hash }
            }
            let mine = s.own.last(where: { $0.index == index })?.hash
            if let mine { h[selfID] = mine }
            return (mine, h)
        }
        guard let mine, hashes.count > 1 else { return nil }
        var holders: [String: [NodeID]] = [:]
        for (id, h) in hashes { holders[h, default: []].append(id) }
        let majority = members.count / 2 + 1
        let winner = holders.first { $0.value.count >= majority }
        let everyone = hashes.count == members.count
        let corrupt = winner.map { $0.key != mine } ?? (everyone && holders.count > 1)
        let verdict = Verdict(index: index, hash: mine, hashes: hashes, voters: members,
                              conclusive: winner != nil || everyone, corrupt: corrupt)
        state.withLock { $0.last = verdict }
        if corrupt {
            let why = winner.map { "\($0.value.sorted().joined(separator: ", ")) hold \($0.key)" }
                ?? "no hash is held by a majority (\(holders.map { "\($0.key): \($0.value.sorted().joined(separator: ", "))" }.sorted().joined(separator: "; ")))"
            store.alarms.raise(.corrupt, "at applied index \(index) this member's state hash is \(mine); \(why)")
        } else if let winner {
            // A peer holding a minority hash raises the alarm itself (it judges the same hashes);
            // here it is only logged, once per peer and index.
            for (id, h) in hashes where h != winner.key {
                let key = "\(id)@\(index)"
                let first = state.withLock { s -> Bool in
                    if s.logged.count >= Self.maxLogged { s.logged.removeAll() }
                    return s.logged.insert(key).inserted
                }
                if first {
                    logger.error("a member's state hash disagrees with the majority's",
                                 metadata: ["member": "\(id)", "appliedIndex": "\(index)", "hash": "\(h)", "majority": "\(winner.key)"])
                }
            }
        }
        return verdict
    }
}

extension CorruptionCheck.Verdict {
    /// The answer of `POST /.ember/check/hashes`.
    func json(node: NodeID, alarm: StoreAlarms.Alarm?) -> JSON {
        .object([
            "node": .string(node),
            "appliedIndex": .int(Int64(index)),
            "stateHash": .string(hash),
            "voters": .array(voters.map { .string($0) }),
            "hashes": .object(KeyMap(hashes.mapValues { JSON.string($0) })),
            // Voters that did not answer at this index (behind, ahead or unreachable).
            "missing": .array(voters.filter { hashes[$0] == nil }.map { .string($0) }),
            "conclusive": .bool(conclusive),
            "corrupt": .bool(corrupt),
            "alarm": alarm.map { .string($0.message) } ?? .null,
        ])
    }
}
