#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging

/// Opt-in (emberd's `--learner-nice N`, issue 38 (c)): while this node is a learner, every thread
/// of the process runs at niceness N, so on a host shared with voters a learner takes the CPU
/// they leave rather than an even share of it (on one 2-core machine a learner's share was what
/// cost the cluster its write throughput and commit latency: docs/SCALING.md). Promoted, the
/// node goes back to the niceness it started with; lowering niceness needs the privilege to
/// (CAP_SYS_NICE or RLIMIT_NICE), without which it stays niced and says so: restart it.
/// Off (0) by default: a learner on a machine of its own gains nothing from it.
struct LearnerPriority {
    /// Niceness while a learner (0: off).
    let nice: Int32
    /// The niceness the process started with.
    let original: Int32
    /// Sets every thread of the process to a niceness; false when one refused.
    let set: (Int32) -> Bool
    private(set) var niced = false
    /// Ticks between two settings while niced (`tick`): threads a thread pool starts later
    /// do not always inherit it (libdispatch's overcommit threads were seen at 0).
    let reassertTicks: Int
    private var ticks = 0

    init(nice: Int32, original: Int32 = LearnerPriority.currentNice(), reassertTicks: Int = 20,
         set: @escaping (Int32) -> Bool = LearnerPriority.setProcessNice) {
        precondition((0...19).contains(nice), "niceness 0...19")
        precondition(reassertTicks > 0)
        self.nice = nice
        self.reassertTicks = reassertTicks
        self.original = original
        self.set = set
    }

    /// Follows the node's role (called after each Raft loop turn): sets the process's niceness
    /// when it becomes or stops being a learner. Returns a warning when that failed.
    mutating func update(learner: Bool) -> String? {
        guard nice > 0, learner != niced else { return nil }
        niced = learner
        ticks = 0
        let target = learner ? max(nice, original) : original
        guard set(target) else {
            return learner
                ? "could not lower this learner's scheduling priority to niceness \(target)"
                : "could not restore niceness \(original) after leaving the learner role (needs CAP_SYS_NICE); restart the node"
        }
        return nil
    }

    /// A Raft tick: while niced, every `reassertTicks` ticks the niceness is set again on every
    /// thread (one directory listing and a syscall per thread).
    mutating func tick() {
        guard niced else { return }
        ticks += 1
        guard ticks >= reassertTicks else { return }
        ticks = 0
        _ = set(max(nice, original))
    }

    static func currentNice() -> Int32 {
        #if os(Linux)
        errno = 0
        return getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        #else
        return 0
        #endif
    }

    /// Linux niceness is per thread (threads made later inherit their creator's): every thread
    /// listed in /proc/self/task is set.
    static func setProcessNice(_ value: Int32) -> Bool {
        #if os(Linux)
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return false }
        var ok = true
        for task in tasks {
            guard let tid = id_t(task) else { continue }
            if setpriority(__priority_which_t(PRIO_PROCESS.rawValue), tid, value) != 0 && errno != ESRCH { ok = false }
        }
        return ok
        #else
        return false
        #endif
    }
}
