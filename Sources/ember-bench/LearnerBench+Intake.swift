import AsyncHTTPClient
import Foundation

/// What each learner took in during a writes column (issue 38): its apply transactions and the
/// entries in them, read from its `/metrics` before and after the load (a learner's leader sends
/// it one AppendEntries at a time, each applied in one transaction: entries per transaction is
/// its batch size), and how far behind the leader's commit index it was when the load ended.
struct LearnerIntake {
    var entries = 0.0
    var commits = 0.0

    /// A node's committed entries and LMDB commits so far (nil: no answer).
    static func read(_ http: HTTPClient, _ url: String) async -> LearnerIntake? {
        guard let r = try? await http.execute(HTTPClientRequest(url: url + "/metrics"), timeout: .seconds(5)),
              let body = try? await r.body.collect(upTo: 8 << 20) else { return nil }
        var intake = LearnerIntake()
        for line in String(buffer: body).split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let v = Double(parts[1]) else { continue }
            if parts[0] == "ember_committed_entries_total" { intake.entries = v }
            if parts[0] == "ember_storage_commits_total" { intake.commits = v }
        }
        return intake
    }

    static func snapshot(_ http: HTTPClient, _ c: LearnerCluster) async -> [LearnerIntake?] {
        var out: [LearnerIntake?] = []
        for l in c.learners { out.append(await read(http, l.url)) }
        return out
    }

    /// One line per learner: entries per transaction over the load, and its lag at its end.
    static func report(_ http: HTTPClient, _ c: LearnerCluster, before: [LearnerIntake?], seconds: Double) async {
        guard !c.learners.isEmpty else { return }
        let commit = (try? await c.status(c.leaderURL))?["commitIndex"] as? Int ?? -1
        var lags: [String] = []
        for l in c.learners {
            let applied = (try? await c.status(l.url))?["appliedIndex"] as? Int ?? -1
            lags.append("\(l.name) \(commit - applied)")
        }
        let after = await snapshot(http, c)
        var parts: [String] = []
        for (i, l) in c.learners.enumerated() {
            guard let b = before[i], let a = after[i], a.commits > b.commits else { continue }
            let n = a.entries - b.entries, k = a.commits - b.commits
            parts.append(String(format: "%@ %.0f entries in %.0f transactions (%.0f per transaction, %.1f per second)",
                                l.name, n, k, n / k, k / max(seconds, 1e-9)))
        }
        print("  learners' batches over the load: " + parts.joined(separator: "; ")
              + "; behind the leader's commit index when it ended: " + lags.joined(separator: ", ") + " entries")
    }
}
