// Learner churn (`SimOptions.learnerChangeRate`): the leader adds a fresh learner, removes one,
// promotes one or demotes a voter, one single-server change at a time.

import EmberRaft
import EmberRaftHost

extension SimCluster {
    func changeLearners() throws {
        guard let l = currentLeader else { return }
        let m = hosts[l].node!.membership
        let change: ConfigChange
        switch rng.below(4) {
        case 0 where !m.learners.isEmpty && m.voters.count <= options.nodeCount:
            change = .promoteLearner(m.learners[rng.below(m.learners.count)])
        case 1 where m.voters.count >= options.nodeCount:
            // Possibly the leader itself: it steps down once its demotion commits.
            change = .demoteVoter(m.voters[rng.below(m.voters.count)])
        case 2 where !m.learners.isEmpty:
            let victim = m.learners[rng.below(m.learners.count)]
            removed.insert(victim)
            change = .removeVoter(victim)
        default:
            // A node that joined earlier but whose addition never took effect, else a fresh one.
            let candidate = hosts.first { !m.isMember($0.id) && !removed.contains($0.id) }?.id ?? addJoiningHost()
            change = .addLearner(candidate)
        }
        stats.learnerChanges += 1
        lastRejection = nil
        lastProposals = []
        try step(l, .proposeConfigChange(change))
        let accepted = lastProposals.contains { if case .accepted = $0 { true } else { false } }
        switch change {
        case .promoteLearner:
            if accepted { stats.promotions += 1 }
            if case .learnerBehind = lastRejection { stats.promotionsRefusedBehind += 1 }
        case .demoteVoter:
            if accepted { stats.demotions += 1 }
        default:
            break
        }
    }
}
