// Wing & Gong style linearizability search with memoization (as in Porcupine), over a
// per-key register model. Operations with unknown outcome are optional: they may be linearized
// anywhere after their call, or not at all.

import EmberRaft

public enum LinearizabilityResult: Sendable, Hashable {
    case ok
    /// No valid linearization exists for this key.
    case illegal(key: String)
    /// The search exceeded its step budget; treated as inconclusive.
    case unknown
}

public enum LinearizabilityChecker {
    public static func check(_ history: [HistoryOperation], maxSteps: Int = 2_000_000) -> LinearizabilityResult {
        var byKey: [String: [HistoryOperation]] = [:]
        for op in history { byKey[op.key, default: []].append(op) }
        var inconclusive = false
        for key in byKey.keys.sorted() {
            switch checkRegister(byKey[key]!, maxSteps: maxSteps) {
            case .ok: continue
            case .unknown: inconclusive = true
            case .illegal: return .illegal(key: key)
            }
        }
        return inconclusive ? .unknown : .ok
    }

    /// Register semantics: returns the new value if `op` is consistent with `state`, else nil.
    static func step(_ state: Int64?, _ op: HistoryOperation) -> Int64?? {
        switch (op.input, op.output) {
        case (.put(let v), .ok), (.put(let v), .unknown):
            return .some(v)
        case (.get, .value(let v)):
            return v == state ? .some(state) : nil
        case (.cas(let e, let n), .casResult(let success)):
            if success { return e == state ? .some(n) : nil }
            return e != state ? .some(state) : nil
        case (.cas(let e, let n), .unknown):
            return .some(e == state ? n : state)
        default:
            return nil
        }
    }

    private struct MemoKey: Hashable {
        var done: [UInt64]
        var state: Int64?
    }

    static func checkRegister(_ ops: [HistoryOperation], maxSteps: Int) -> LinearizabilityResult {
        let ops = ops.sorted { $0.call < $1.call }
        let n = ops.count
        let words = (n + 63) / 64
        let required = ops.filter { $0.ret != nil }.count
        var done = [UInt64](repeating: 0, count: words)
        var memo = Set<MemoKey>()
        var steps = 0
        var exhausted = false

        func isDone(_ i: Int) -> Bool { done[i >> 6] & (1 << UInt64(i & 63)) != 0 }
        func flip(_ i: Int) { done[i >> 6] ^= (1 << UInt64(i & 63)) }

        // Depth-first search; `linearizedRequired` counts completed ops placed so far.
        func search(_ state: Int64?, _ linearizedRequired: Int) -> Bool {
            if linearizedRequired == required { return true }
            steps += 1
            if steps > maxSteps { exhausted = true; return false }
            guard memo.insert(MemoKey(done: done, state: state)).inserted else { return false }
            // An op may go next only if it was invoked before every pending op's completion.
            var minRet = Int.max
            for i in 0..<n where !isDone(i) { if let r = ops[i].ret { minRet = min(minRet, r) } }
            for i in 0..<n where !isDone(i) {
                if ops[i].call > minRet { break }  // sorted by call
                guard let next = step(state, ops[i]) else { continue }
                flip(i)
                let ok = search(next, linearizedRequired + (ops[i].ret != nil ? 1 : 0))
                flip(i)
                if ok { return true }
                if exhausted { return false }
            }
            return false
        }

        if search(nil, 0) { return .ok }
        return exhausted ? .unknown : .illegal(key: ops.first?.key ?? "")
    }
}
