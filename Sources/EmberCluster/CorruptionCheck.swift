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
/// - A round (the leader's every `interval`, any member's first one after start, and on demand:
///   `POST /.ember/check/hashes`) names an index every member is at or before (the asker's last
///   log index) and asks every voter for its hash there. Each member's apply stops at that index
///   and a read snapshot is taken there (`EmberStore.statePoint`), so the hashes meet under
///   steady writes too; each member sends its hash to every voter. A member already past the
///   index (or not there within `answerWaitSeconds`) answers at its applied index instead
///   (compared only where indexes meet).
/// - Judgement at an index both sides hold: a hash held by a majority of the voters is right; a
///   member holding another raises CORRUPT. With every voter heard and no majority, each raises it.
/// - Learners (issue 38) are reporters: they are asked, answer and hear every hash like voters,
///   and a learner whose hash differs from the voters' majority raises CORRUPT on itself; their
///   hashes never count toward (or against) a majority, and without a voters' majority a learner
///   concludes nothing (the voters judge themselves).
///
/// Off the Raft driver: frames arrive from the transport's handler, hashes are computed on one
/// serial queue (a full scan of the tree: seconds for a large state).
final class CorruptionCheck: Sendable {
    /// Pairs kept per member (own and each peer's), newest last.
    static let keptPairs = 16
    /// How long an asked member waits for its applied index to reach the asker's (a member
    /// behind by more answers at its applied index; a loaded machine lags seconds).
    static let answerWaitSeconds = 5.0
    /// Answers computed at once at most (each may wait and hash); further asks are dropped.
    static let maxAnswering = 8
    /// How long an on-demand check waits for every voter's answer.
    static let onDemandWaitSeconds = 8.0
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
        /// Learners' hashes at `index` (this member's included when it is one): compared with
        /// the voters' majority, never counted in it.
        var learnerHashes: [NodeID: String] = [:]
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
    /// The configuration's learners: asked and told like voters, judged against the voters.
    let learners: @Sendable () -> [NodeID]
    /// The Raft log's last index in memory (entries are sent to followers before this member's
    /// own log holds them durably, so the store's last index can be behind what others applied).
    let raftLastIndex: @Sendable () -> UInt64
    /// Periodic rounds are the leader's (one round checks every member).
    let isLeader: @Sendable () -> Bool
    let send: @Sendable (HashCheck, NodeID) -> Void
    let logger: Logger
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "ember-corruption-check")
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(store: EmberStore, selfID: NodeID, interval: Duration?, logger: Logger,
         voters: @escaping @Sendable () -> [NodeID], learners: @escaping @Sendable () -> [NodeID] = { [] },
         raftLastIndex: @escaping @Sendable () -> UInt64 = { 0 },
         isLeader: @escaping @Sendable () -> Bool,
         send: @escaping @Sendable (HashCheck, NodeID) -> Void) {
        self.store = store
        self.selfID = selfID
        self.interval = interval
        self.logger = logger
        self.voters = voters
        self.learners = learners
        self.raftLastIndex = raftLastIndex
        self.isLeader = isLeader
        self.send = send
    }

    func start() {
        guard let interval else { return }
        let first = min(interval, .milliseconds(Int64(Self.firstRoundSeconds * 1000)))
        loop.withLock { $0 = Task { [weak self] in
            var wait = first
            var firstRound = true
            while !Task.isCancelled {
                do { try await Task.sleep(for: wait) } catch { return }
                guard let self else { return }
                // The first round is every member's: a restarted member with a damaged data
                // file finds out soon, whatever the leader's interval.
                if firstRound || self.isLeader() { _ = await self.round() }
                firstRound = false
                wait = interval
            }
        } }
    }

    func stop() {
        loop.withLock { $0?.cancel(); $0 = nil }
    }

    var lastVerdict: Verdict? { state.withLock { $0.last } }

    /// Everyone asked and told: the voters, then the learners (each once).
    private func reporters() -> [NodeID] {
        let v = voters()
        return v + learners().filter { !v.contains($0) }
    }

    // MARK: - Rounds

    /// Asks every other voter for its hash at this member's last log index (an index every member
    /// is at or before), hashes its own state there, sends it to every voter and judges what has
    /// arrived so far (answers are judged as they come). Each asked member sends its answer to
    /// every voter, so one round gives every member every hash at one index, writes or not.
    /// Falls back to the applied index when the point was not reached in time. Returns the
    /// index asked (`target`) and this member's pair (at `target`, or at the fallback).
    @discardableResult
    func round() async -> (target: UInt64, mine: Pair)? {
        // No member has applied past the newest entry in existence; the store's last index alone
        // can be behind entries already sent (and committed by the others' acks).
        let target = max(store.lastLogIndex, raftLastIndex())
        let others = reporters().filter { $0 != selfID }
        // The point is queued on the writer before anything is sent, so this member's own apply
        // cannot pass it while the asks travel.
        let point = pointRequest(at: target)
        // The request form (no hash): the hash follows once computed, which takes a full scan,
        // and by then the others would have applied past `target`.
        for peer in others { send(HashCheck(from: selfID, appliedIndex: target, stateHash: "", ask: true), peer) }
        guard let mine = await pair(at: target, point: point) else { return nil }
        for peer in others { send(HashCheck(from: selfID, appliedIndex: mine.index, stateHash: mine.hash, ask: false), peer) }
        judge(at: mine.index)
        return (target, mine)
    }

    /// Rounds an on-demand check makes at most. A round's index is this member's last log index
    /// as last published (Raft's status at the end of a turn, the store's after a commit): entries
    /// the loop appended since can carry this member's apply (jobs queued before its point) or a
    /// peer's past it, and that member then answers at another index. Seen under steady writes
    /// (test_corruption.py, ~1 run in 6–40 on a busy machine): a voter missing, or no verdict.
    static let onDemandRounds = 3

    /// On demand: a round, then up to `onDemandWaitSeconds` for every voter's hash at its index;
    /// another round (at most `onDemandRounds`) when this member or a missing voter answered at
    /// another index instead (its apply had passed the round's).
    func check() async -> Verdict? {
        var attempt = 1
        while true {
            let before = state.withLock { s in s.peers.mapValues { $0.map(\.index).max() ?? 0 } }
            guard let (asked, mine) = await round() else { return nil }
            var elsewhere = mine.index > asked
            let deadline = ContinuousClock.now + .milliseconds(Int64(Self.onDemandWaitSeconds * 1000))
            while !elsewhere && ContinuousClock.now < deadline {
                let members = voters()
                let (missing, answered) = state.withLock { s -> ([NodeID], [NodeID]) in
                    let missing = members.filter { $0 != selfID && s.peers[$0]?.contains { $0.index == mine.index } != true }
                    // Heard from since the round began, at another index.
                    return (missing, missing.filter { (s.peers[$0]?.map(\.index).max() ?? 0) > (before[$0] ?? 0) })
                }
                if missing.isEmpty { break }
                if answered.count == missing.count { elsewhere = true; break }
                try? await Task.sleep(for: .milliseconds(20))
            }
            if !elsewhere || attempt == Self.onDemandRounds { return judge(at: mine.index) }
            attempt += 1
        }
    }

    /// A peer's report (from the transport's handler): a hash (kept and judged) and/or a request
    /// for this member's hash at an index (an empty hash is a request only).
    func receive(_ report: HashCheck) {
        if !report.stateHash.isEmpty {
            let pair = Pair(index: report.appliedIndex, hash: report.stateHash)
            state.withLock { s in
                var kept = s.peers[report.from, default: []]
                if !kept.contains(pair) { kept.append(pair) }
                if kept.count > Self.keptPairs { kept.removeFirst(kept.count - Self.keptPairs) }
                s.peers[report.from] = kept
            }
            judge(at: report.appliedIndex)
        }
        guard report.ask else { return }
        let admitted = state.withLock { s -> Bool in
            guard s.answering < Self.maxAnswering else { return false }
            s.answering += 1
            return true
        }
        guard admitted else { return }
        // Queued on the writer now, from the transport's handler: a Raft frame behind this one
        // (a commit past the index) reaches the writer after the point, whatever tasks run first.
        let point = pointRequest(at: report.appliedIndex)
        Task {
            defer { state.withLock { $0.answering -= 1 } }
            guard let mine = await pair(at: report.appliedIndex, point: point) else { return }
            // To every voter and learner, not only the asker: each judges itself from every hash.
            for peer in reporters() where peer != selfID {
                send(HashCheck(from: selfID, appliedIndex: mine.index, stateHash: mine.hash, ask: false), peer)
            }
            judge(at: mine.index)
        }
    }

    /// Asks the writer to stop at `index` for a snapshot (nil: this member's hash there is kept).
    private func pointRequest(at index: UInt64) -> Task<StatePoint?, Never>? {
        if state.withLock({ s in s.own.contains { $0.index == index } }) { return nil }
        return store.requestStatePoint(at: index, timeout: .milliseconds(Int64(Self.answerWaitSeconds * 1000)))
    }

    /// This member's hash exactly at `index` (the apply stops there for `point`, waited on up to
    /// `answerWaitSeconds`), else at its applied index.
    private func pair(at index: UInt64, point request: Task<StatePoint?, Never>?) async -> Pair? {
        if let kept = state.withLock({ $0.own.last { $0.index == index } }) {
            if let request { Task { await request.value?.end() } }
            return kept
        }
        if let point = await request?.value {
            let hash: String? = await withCheckedContinuation { done in
                queue.async {
                    // Ended before the caller resumes: a store closed right after the round
                    // (a test's `defer`, a stopping node) must find no read transaction open.
                    let hash = try? point.hash()
                    point.end()
                    done.resume(returning: hash)
                }
            }
            if let hash {
                let pair = Pair(index: point.index, hash: hash)
                keep(pair)
                return pair
            }
        }
        return await ownPair()
    }

    private func keep(_ pair: Pair) {
        state.withLock { s in
            if !s.own.contains(pair) { s.own.append(pair) }
            if s.own.count > Self.keptPairs { s.own.removeFirst(s.own.count - Self.keptPairs) }
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
        keep(pair)
        return pair
    }

    // MARK: - Judgement

    /// Judges this member at `index` from the hashes held there; raises CORRUPT on a minority hash.
    /// A learner is judged against the voters' majority only (its own hash and other learners'
    /// are never counted).
    @discardableResult
    func judge(at index: UInt64) -> Verdict? {
        let members = voters()
        let learnerIDs = learners().filter { !members.contains($0) }
        let isLearner = learnerIDs.contains(selfID)
        guard members.contains(selfID) || isLearner else { return nil }  // a joining node has no say yet
        let (mine, hashes, learnerHashes) = state.withLock { s -> (String?, [NodeID: String], [NodeID: String]) in
            var h: [NodeID: String] = [:], l: [NodeID: String] = [:]
            for m in members where m != selfID {
                if let p = s.peers[m]?.last(where: { $0.index == index }) { h[m] = p.hash }
            }
            for m in learnerIDs where m != selfID {
                if let p = s.peers[m]?.last(where: { $0.index == index }) { l[m] = p.hash }
            }
            let mine = s.own.last(where: { $0.index == index })?.hash
            if let mine {
                if isLearner { l[selfID] = mine } else { h[selfID] = mine }
            }
            return (mine, h, l)
        }
        guard let mine else { return nil }
        // The voters' hashes only: a learner's never makes or breaks a majority.
        var holders: [String: [NodeID]] = [:]
        for (id, h) in hashes { holders[h, default: []].append(id) }
        let majority = members.count / 2 + 1
        let winner = holders.first { $0.value.count >= majority }
        let everyone = hashes.count == members.count
        let corrupt: Bool, conclusive: Bool
        if isLearner {
            // Without a voters' majority a learner cannot tell who is right: the voters judge
            // themselves, the learner waits for a round that concludes.
            guard !hashes.isEmpty else { return nil }
            corrupt = winner.map { $0.key != mine } ?? false
            conclusive = winner != nil
        } else {
            guard hashes.count > 1 else { return nil }
            corrupt = winner.map { $0.key != mine } ?? (everyone && holders.count > 1)
            conclusive = winner != nil || everyone
        }
        let verdict = Verdict(index: index, hash: mine, hashes: hashes, voters: members, learnerHashes: learnerHashes,
                              conclusive: conclusive, corrupt: corrupt)
        state.withLock { $0.last = verdict }
        if corrupt {
            let why = winner.map { "\($0.value.sorted().joined(separator: ", ")) hold \($0.key)\(isLearner ? " (a majority of the voters)" : "")" }
                ?? "no hash is held by a majority (\(holders.map { "\($0.key): \($0.value.sorted().joined(separator: ", "))" }.sorted().joined(separator: "; ")))"
            store.alarms.raise(.corrupt, "at applied index \(index) this \(isLearner ? "learner" : "member")'s state hash is \(mine); \(why)")
        } else if let winner {
            // A peer holding a minority hash raises the alarm itself (it judges the same hashes);
            // here it is only logged, once per peer and index.
            for (id, h) in hashes.merging(learnerHashes, uniquingKeysWith: { a, _ in a }) where h != winner.key {
                let key = "\(id)@\(index)"
                let first = state.withLock { s -> Bool in
                    if s.logged.count >= Self.maxLogged { s.logged.removeAll() }
                    return s.logged.insert(key).inserted
                }
                if first {
                    logger.error("a member's state hash disagrees with the majority's",
                                 metadata: ["member": "\(id)", "learner": "\(learnerHashes[id] != nil)", "appliedIndex": "\(index)",
                                            "hash": "\(h)", "majority": "\(winner.key)"])
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
            // Learners' hashes: compared with the voters' majority, never counted in it.
            "learnerHashes": .object(KeyMap(learnerHashes.mapValues { JSON.string($0) })),
            // Voters that did not answer at this index (behind, ahead or unreachable).
            "missing": .array(voters.filter { hashes[$0] == nil }.map { .string($0) }),
            "conclusive": .bool(conclusive),
            "corrupt": .bool(corrupt),
            "alarm": alarm.map { .string($0.message) } ?? .null,
        ])
    }
}
