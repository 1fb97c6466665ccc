// Simulated clients issuing put / get / compare-and-set, one outstanding operation each.

import EmberRaft

extension SimCluster {
    func runClients() throws {
        for c in clients.indices {
            if let busy = clients[c].busy {
                if now - busy.since > options.clientTimeout { abandon(client: c, historyID: busy.historyID) }
                continue
            }
            guard rng.chance(options.clientRequestRate) else { continue }
            try issue(client: c)
        }
    }

    /// Gives up on an operation: its outcome becomes unknown (reads are dropped).
    func abandon(client c: Int, historyID: Int) {
        history.abandon(historyID)
        pendingKinds[historyID] = nil
        unknownOps += 1
        clients[c].busy = nil
        clients[c].leaderHint = nil
    }

    private func pickNode(_ c: Int) -> Int? {
        // With forwarding, clients write wherever they are connected: followers forward.
        if !options.forwarding, let hint = clients[c].leaderHint, let i = hostIndex(hint), hosts[i].node != nil { return i }
        let up = hosts.indices.filter { hosts[$0].node != nil }
        return up.isEmpty ? nil : up[rng.below(up.count)]
    }

    private func issue(client c: Int) throws {
        guard let target = pickNode(c) else { return }
        let key = options.keys[rng.below(options.keys.count)]
        let roll = rng.below(100)
        if roll < 35 {
            let historyID = history.invoke(client: c, key: key, input: .get)
            clients[c].busy = (historyID, now)
            pendingKinds[historyID] = .get
            if options.unsafeLocalReads {
                finish(c, historyID, .value(hosts[target].kv.get(key)))
                return
            }
            nextReadID += 1
            hosts[target].pendingReads[nextReadID] = (historyID, c, key)
            try step(target, .readIndex(id: nextReadID))
            return
        }
        nextValue += 1
        nextOpID += 1
        let op: KVCommand.Op
        let input: KVInput
        let kind: OpKind
        if roll < 70 {
            op = .put(key: key, value: nextValue)
            input = .put(nextValue)
            kind = .put
        } else {
            // Mostly expect a recently seen value so some CAS operations succeed.
            let expected: Int64? = rng.below(4) == 0 ? nil : clients[c].lastSeen[key] ?? nextValue - 1
            op = .cas(key: key, expected: expected, new: nextValue)
            input = .cas(expected: expected, new: nextValue)
            kind = .cas
        }
        let historyID = history.invoke(client: c, key: key, input: input)
        clients[c].busy = (historyID, now)
        pendingKinds[historyID] = kind
        let payload = KVCommand(opID: nextOpID, op: op).encoded()
        if options.forwarding {
            // Queued at the node it reached; proposed or forwarded in order (runForwarding).
            enqueueForward(target, SimWrite(opID: nextOpID, historyID: historyID, client: c, payload: payload))
            return
        }
        proposing = (historyID, c, nextOpID)
        defer { proposing = nil }
        try step(target, .propose(payload))
    }
}
