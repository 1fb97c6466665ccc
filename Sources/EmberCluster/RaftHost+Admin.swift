import EmberNodeStore
import EmberCore
import EmberRaft
import EmberRaftHost
import EmberStorage

/// Operator requests in flight in the driver (owned by the loop).
struct AdminBook {
    /// Sent to the leader, awaiting its `adminReply` (this node was a follower).
    var forwards: [UInt64: PendingAdmin] = [:]
    var nextID: UInt64 = 1
    /// Config entries this leader appended, by index: answered when that index is applied.
    var awaitingApply: [UInt64: (term: UInt64, request: PendingAdmin)] = [:]
    /// Leadership transfers waiting for their target to lead. `then`: a request to route once
    /// the target leads (removing the leader hands leadership over first).
    var transfers: [(target: NodeID, request: PendingAdmin, then: PendingAdmin?)] = []
    /// Changes refused as pending, retried on the next ticks (see `PendingAdmin.retryUntil`).
    var retries: [PendingAdmin] = []

    /// How long a change refused as pending is retried before answering 409.
    static let pendingRetry = Duration.seconds(1)

    /// Admin requests held at once; more are refused (503). Only one change can be pending in
    /// Raft anyway, so a handful covers concurrent operators.
    static let maxPending = 64

    var count: Int { forwards.count + awaitingApply.count + transfers.count + retries.count }
}

/// Membership changes and leadership transfers: the leader proposes them (a follower forwards
/// them to the leader) and answers once the config entry is applied or the transfer is done.
extension RaftHost {
    func answer(_ a: PendingAdmin, _ reply: ClusterAdminAnswer) {
        switch a.origin {
        case .local(let c):
            c.resume(returning: reply)
        case .remote(let peer, let id):
            let frame = AdminReply(from: config.nodeID, requestID: id, status: reply.status, body: reply.body.serialized())
            // The request came back to the node that forwarded it (it leads now, e.g. after the
            // leader it asked handed leadership over to it): there is no link to itself, so its
            // waiting caller is answered here.
            if peer == config.nodeID {
                adminAnswered(frame)
            } else {
                transport.send(.adminReply(frame), to: peer)
            }
        }
    }

    /// A request made on this node: served here when leading, else forwarded to the leader.
    func routeAdmin(_ a: PendingAdmin) {
        guard admin.count < AdminBook.maxPending else {
            answer(a, .error(503, "Too many cluster changes are in progress on this node; retry later"))
            return
        }
        if node.role == .leader {
            serveAdmin(a)
            return
        }
        guard let leader = node.leaderID, leader != node.id else {
            answer(a, .error(503, "No cluster leader is known to \(node.id); retry later"))
            return
        }
        switch a.origin {
        case .local:
            let id = admin.nextID
            admin.nextID += 1
            admin.forwards[id] = a
            transport.send(.admin(AdminForward(from: node.id, origin: node.id, requestID: id, operation: a.operation)), to: leader)
        case .remote(let origin, let id):
            // Passed on (we handed leadership over): the leader answers the origin directly, which
            // also works when we are the member being removed and no longer heard.
            transport.send(.admin(AdminForward(from: node.id, origin: origin, requestID: id, operation: a.operation)), to: leader)
        }
    }

    /// The leader answered a request we forwarded.
    func adminAnswered(_ r: AdminReply) {
        guard let a = admin.forwards.removeValue(forKey: r.requestID) else { return }  // timed out already
        let body = (try? JSON.parse(r.body)) ?? .object(["error": .string(r.body)])
        answer(a, ClusterAdminAnswer(status: r.status, body: body))
    }

    /// Performs a request as the leader.
    func serveAdmin(_ a: PendingAdmin) {
        guard node.role == .leader else {
            answer(a, .error(503, "\(node.id) is not the leader (leader: \(node.leaderID ?? "unknown")); retry"))
            return
        }
        if case .remote = a.origin, admin.count >= AdminBook.maxPending {
            answer(a, .error(503, "Too many cluster changes are in progress; retry later"))
            return
        }
        let voters = node.membership
        switch a.operation {
        case .addMember(let id, let peer, let url):
            if voters.contains(id) {
                answer(a, .error(409, "\(id) is already a member"))
                return
            }
            if voters.isLearner(id) {
                answer(a, .error(409, "\(id) is already a learner; promote it (POST /.ember/members/\(id)/promote)"))
                return
            }
            guard roomForAMember(a) else { return }
            proposeChange(.addVoter(id), setting: id, to: MemberDirectory.Member(peer: peer.description, url: url), a)
        case .addLearner(let id, let peer, let url):
            guard learnersReadableByAll(a) else { return }
            guard !voters.isMember(id) else {
                answer(a, .error(409, "\(id) is already a \(voters.isLearner(id) ? "learner" : "member")"))
                return
            }
            guard roomForAMember(a) else { return }
            proposeChange(.addLearner(id), setting: id, to: MemberDirectory.Member(peer: peer.description, url: url, learner: true), a)
        case .promoteMember(let id):
            guard voters.isLearner(id), var member = members.directory.members[id] else {
                answer(a, voters.contains(id) ? .error(409, "\(id) is already a voter") : .error(404, "\(id) is not a learner"))
                return
            }
            member.learner = nil
            proposeChange(.promoteLearner(id), setting: id, to: member, a)
        case .demoteMember(let id):
            guard learnersReadableByAll(a) else { return }
            guard voters.contains(id), var member = members.directory.members[id] else {
                answer(a, voters.isLearner(id) ? .error(409, "\(id) is already a learner") : .error(404, "\(id) is not a member"))
                return
            }
            guard voters.voters.count > 1 else {
                answer(a, .error(409, "\(id) is the last voter and cannot be demoted"))
                return
            }
            // Demoting the leader needs no hand-over first: it steps down once the change commits.
            member.learner = true
            proposeChange(.demoteVoter(id), setting: id, to: member, a)
        case .removeMember(let id):
            guard voters.isMember(id) else {
                answer(a, .error(404, "\(id) is not a member"))
                return
            }
            guard voters.voters.count > 1 || voters.isLearner(id) else {
                answer(a, .error(409, "\(id) is the last member and cannot be removed"))
                return
            }
            if id == node.id, let target = node.status.progress.filter({ voters.contains($0.key) })
                .max(by: { ($0.value.matchIndex, $1.key) < ($1.value.matchIndex, $0.key) })?.key {
                // Removing the leader: hand leadership to the most up-to-date member first (no
                // election timeout for the cluster), then the new leader removes us.
                logger.info("removing the leader: handing leadership over first", metadata: ["to": "\(target)"])
                startTransfer(to: target, a, then: a)
                return
            }
            proposeChange(.removeVoter(id), setting: id, to: nil, a)
        case .transferLeadership(let to):
            guard voters.contains(to) else {
                answer(a, voters.isLearner(to) ? .error(409, "\(to) is a learner and cannot lead; promote it first")
                    : .error(404, "\(to) is not a member"))
                return
            }
            if to == node.id {
                answer(a, ClusterAdminAnswer(status: 200, body: .object(["leader": .string(to), "term": .int(Int64(node.term))])))
                return
            }
            startTransfer(to: to, a, then: nil)
        }
    }

    /// A configuration with learners is a config entry a build before peer level 3 (0.5.0) cannot
    /// read: refuses (409) a change that makes one while a member's link has not shown level 3.
    private func learnersReadableByAll(_ a: PendingAdmin) -> Bool {
        let peers = node.membership.members.filter { $0 != node.id }
        if transport.peersSpeak(3, peers) { return true }
        let behind = peers.filter { !transport.peersSpeak(3, [$0]) }
        answer(a, .error(409, "\(behind.joined(separator: ", ")) runs a build before peer level 3 (or is not connected) and cannot read a configuration with learners; upgrade every member first"))
        return false
    }

    private func startTransfer(to target: NodeID, _ a: PendingAdmin, then: PendingAdmin?) {
        var request = a
        let limit = ContinuousClock.now + .milliseconds(Int64(config.transferTimeoutSeconds * 1000))
        request.deadline = min(a.deadline, limit)
        admin.transfers.append((target, request, then))
        logger.info("leadership transfer requested", metadata: ["to": "\(target)"])
        step(.transferLeadership(to: target))
    }

    /// True when the cluster has room for one more member (`MemberDirectory.maxMembers`); else `a`
    /// is answered 409.
    private func roomForAMember(_ a: PendingAdmin) -> Bool {
        guard node.membership.members.count < MemberDirectory.maxMembers else {
            answer(a, .error(409, "The cluster already has \(MemberDirectory.maxMembers) members (the limit)"))
            return false
        }
        return true
    }

    /// Proposes `change` with the directory (which travels with it) holding `member` for `id`
    /// (nil: removed).
    private func proposeChange(_ change: ConfigChange, setting id: NodeID, to member: MemberDirectory.Member?, _ a: PendingAdmin) {
        var next = members.directory
        next.members[id] = member
        for outcome in step(.proposeConfigChange(change, context: next.context)) {
            switch outcome {
            case .proposalAccepted(let index, let term):
                admin.awaitingApply[index] = (term, a)
                logger.info("membership change proposed", metadata: ["change": "\(change)", "index": "\(index)"])
            case .proposalRejected(.configChangePending):
                let now = ContinuousClock.now
                var retry = a
                retry.retryUntil = a.retryUntil ?? now + AdminBook.pendingRetry
                if now < retry.retryUntil! {
                    admin.retries.append(retry)
                } else {
                    answer(a, Self.rejection(.configChangePending))
                }
            case .proposalRejected(let why):
                answer(a, Self.rejection(why))
            default:
                break
            }
        }
    }

    static func rejection(_ why: ProposalRejection) -> ClusterAdminAnswer {
        switch why {
        case .notLeader(let hint):
            return .error(503, "Not the leader (leader: \(hint ?? "unknown")); retry")
        case .transferInProgress:
            return .error(409, "A leadership transfer is in progress; retry shortly")
        case .configChangePending:
            return .error(409, "Another membership change is pending (or the leader has not yet committed an entry of its term); retry when it commits")
        case .configChangeNoop:
            return .error(409, "The change would not alter the membership")
        case .tooManyLearners(let limit):
            return .error(409, "The cluster already has \(limit) learners (the limit)")
        case .learnerBehind(let id, let lag, let limit):
            return .error(409, "\(id) is \(lag) entries behind the leader's log; a learner is promoted only within \(limit) (it would hold commits back until caught up): retry once it has caught up (ember status shows its lag)")
        }
    }

    /// A committed entry was applied: answers the change appended at its index.
    func adminApplied(_ r: WriteResult) {
        guard let waiting = admin.awaitingApply.removeValue(forKey: r.index) else { return }
        let a = waiting.request
        if r.term == waiting.term {
            answer(a, ClusterAdminAnswer(status: 200, body: .object([
                "index": .int(Int64(r.index)),
                "voters": .array(node.log.membership(atApplied: r.index).voters.map { .string($0) }),
                "learners": .array(node.log.membership(atApplied: r.index).learners.map { .string($0) }),
            ])))
        } else {
            answer(a, .error(503, "Leadership changed before the change committed; it did not take effect, retry"))
        }
    }

    /// After each turn: transfers whose target now leads are done.
    func adminTurn() {
        guard !admin.transfers.isEmpty else { return }
        var next: [PendingAdmin] = []
        admin.transfers.removeAll { t in
            guard node.leaderID == t.target else { return false }
            if let then = t.then {
                next.append(then)
            } else {
                answer(t.request, ClusterAdminAnswer(status: 200, body: .object([
                    "leader": .string(t.target), "term": .int(Int64(node.term))])))
            }
            return true
        }
        // Usually forwarded (we handed leadership over); anything Raft does of it joins the next turn.
        for a in next { routeAdmin(a) }
    }

    /// On a tick: changes refused as pending are tried again (or answered 409 once past their window).
    func retryAdmin() {
        guard !admin.retries.isEmpty else { return }
        let due = admin.retries
        admin.retries = []
        for a in due { if node.role == .leader { serveAdmin(a) } else { routeAdmin(a) } }
    }

    func expireAdmin(now: ContinuousClock.Instant) {
        for (id, a) in admin.forwards where now >= a.deadline {
            admin.forwards[id] = nil
            answer(a, .error(503, "The leader did not answer in time; check /.ember/status before retrying"))
        }
        for (index, w) in admin.awaitingApply where now >= w.request.deadline {
            admin.awaitingApply[index] = nil
            answer(w.request, .error(503, "The change (index \(index)) did not commit in time; its outcome is unknown, check /.ember/status"))
        }
        admin.transfers.removeAll { t in
            guard now >= t.request.deadline else { return false }
            answer(t.request, .error(503, "Leadership did not move to \(t.target) in time (leader: \(node.leaderID ?? "unknown")); retry"))
            return true
        }
    }

    func failAllAdmin() {
        let message = ClusterError.shuttingDown.description
        for a in admin.forwards.values { answer(a, .error(503, message)) }
        for w in admin.awaitingApply.values { answer(w.request, .error(503, message)) }
        for t in admin.transfers { answer(t.request, .error(503, message)) }
        for a in admin.retries { answer(a, .error(503, message)) }
        admin = AdminBook()
    }

    /// Keeps the peer transport in step with Raft's voter set: links to new members (addresses
    /// from the config entry's directory), none to removed ones. While the node has no voters
    /// (joining), the configured peers are who it listens to.
    func syncMembership() {
        let m = node.membership
        let departing = node.departingPeers
        guard m != members.synced || departing != members.syncedDeparting else { return }
        let changed = m != members.synced
        members.synced = m
        members.syncedDeparting = departing
        if changed {
            if m.voters.isEmpty {
                members.directory = MemberDirectory(peers: config.peers)
            } else if let context = node.membershipContext, let d = MemberDirectory(context: context) {
                members.directory = d
            } else if let d = try? RaftPersistence.storedDirectory(store), d.membership == m {
                members.directory = d
            } else {
                // Bootstrap membership: the flags' addresses.
                members.directory = MemberDirectory(members: MemberDirectory(peers: config.peers).members.filter { m.isMember($0.key) })
            }
            let d = members.directory
            publishedDirectory.withLock { $0 = d }
            logger.info("membership", metadata: [
                "voters": "\(m)", "member": "\(m.voters.isEmpty || m.isMember(config.nodeID))",
                "learner": "\(m.isLearner(config.nodeID))"])
        }
        var addresses = m.voters.isEmpty ? config.peers : members.directory.addresses
        for (id, address) in config.dialOverrides where addresses[id] != nil { addresses[id] = address }
        members.known.merge(addresses) { _, new in new }
        // A removed peer stays reachable until its removal commits, so it learns of it.
        for id in departing { addresses[id] = members.known[id] }
        transport.setMembers(addresses)
    }
}

extension RaftLog {
    /// The voter set in effect at an index that may have been compacted away since (then the
    /// snapshot's, the best this log still knows).
    func membership(atApplied index: UInt64) -> Membership {
        membership(at: max(index, snapshotIndex))
    }
}
