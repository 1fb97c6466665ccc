import EmberTestSupport
import Testing
@testable import EmberServer

/// The entries a lane settled and has not logged yet (`TriggerHeldEntries`) answer as the set
/// of them would, for runs added and logged in log order (the lane's case) and out of it.
@Suite(.printsSeedOnFailure) struct TriggerHeldEntriesTests {
    @Test(arguments: [1, 2, 3] as [UInt64]) func answersAsASet(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        var held = TriggerHeldEntries()
        var model: Set<UInt64> = []
        var queue: [[UInt64]] = []
        var next: UInt64 = 1
        for step in 0..<4_000 {
            switch r.below(10) {
            case 0...4:
                // A settled run, in log order (now and then one out of it).
                var run: [UInt64] = []
                for _ in 0..<(r.below(40) + 1) { next += UInt64(r.below(3) + 1); run.append(next) }
                if r.below(20) == 0, let low = model.min() { run = [low > 1 ? low - 1 : low] + run }
                held.add(run)
                model.formUnion(run)
                queue.append(run)
            case 5...7:
                // The oldest run logged.
                guard !queue.isEmpty else { continue }
                let run = queue.removeFirst()
                held.remove(run)
                model.subtract(run)
            default:
                // A run logged out of order (not expected of a lane).
                guard queue.count > 1 else { continue }
                let run = queue.remove(at: r.below(queue.count))
                held.remove(run)
                model.subtract(run)
                // Its entries may be in another run too: those stay held.
                for q in queue { held.add(q); model.formUnion(q) }
            }
            #expect(held.count == model.count && held.isEmpty == model.isEmpty && held.max == model.max(), "step \(step)")
            for _ in 0..<8 {
                let probe = UInt64(r.below(Int(next) + 2))
                #expect(held.contains(probe) == model.contains(probe), "step \(step): \(probe)")
            }
        }
    }
}
