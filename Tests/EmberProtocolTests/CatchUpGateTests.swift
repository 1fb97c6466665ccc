import EmberTestSupport
import Testing

@testable import EmberProtocol

@Suite(.printsSeedOnFailure) struct CatchUpGateTests {
    let limits = CatchUpGate.Limits(maxHeld: 3, maxWaitMillis: 1_000)

    /// A single node (caught up at start) never holds a read.
    @Test func aNodeCaughtUpAtStartHoldsNothing() {
        var g = CatchUpGate(caughtUp: true, limits: limits)
        for t in 0..<10 {
            let a = g.arrive(now: Int64(t))
            #expect(a == .proceed)
        }
        #expect(g.heldCount == 0)
        #expect(g.nextDeadline == nil)
    }

    /// Reads that arrive while catching up are held until the catch-up, then released in arrival
    /// order; from then on every read proceeds, and the gate never closes again.
    @Test func heldReadsAreReleasedAtTheCatchUpAndLaterOnesProceed() {
        var g = CatchUpGate(caughtUp: false, limits: limits)
        guard case .hold(let a) = g.arrive(now: 0), case .hold(let b) = g.arrive(now: 5) else {
            Issue.record("a read arriving while catching up is held")
            return
        }
        #expect(a != b)
        #expect(g.heldCount == 2 && g.isHeld(a) && g.isHeld(b))
        #expect(g.nextDeadline == 1_000)
        let r1 = g.reachedCatchUp()
        #expect(r1 == [a, b])
        #expect(g.caughtUp && g.heldCount == 0)
        let r2 = g.arrive(now: 10)
        #expect(r2 == .proceed)
        // Caught up for good: no later expiry or second catch-up changes that.
        let r3 = g.expire(now: 1_000_000)
        #expect(r3 == [])
        let r4 = g.reachedCatchUp()
        #expect(r4 == [])
        let r5 = g.arrive(now: 2_000_000)
        #expect(r5 == .proceed)
    }

    /// Past `maxHeld` reads a new one is refused at once; a slot freed (expiry, a client
    /// giving up) takes one again.
    @Test func readsBeyondTheHeldLimitAreRefused() {
        var g = CatchUpGate(caughtUp: false, limits: limits)
        var ids: [UInt64] = []
        for t in 0..<3 {
            guard case .hold(let id) = g.arrive(now: Int64(t)) else { Issue.record("held \(t)"); return }
            ids.append(id)
        }
        let r6 = g.arrive(now: 3)
        #expect(r6 == .refuse(.tooManyHeld(3)))
        let r7 = g.leave(ids[1])
        #expect(r7)
        let again = g.leave(ids[1])
        #expect(!again, "a read leaves once")
        guard case .hold = g.arrive(now: 4) else { Issue.record("a freed slot holds again"); return }
        #expect(g.heldCount == 3)
        #expect(CatchUpGate.Refusal.tooManyHeld(3).reason.contains("3 requests"))
    }

    /// Each held read is refused once it waited `maxWaitMillis`, not before, oldest first;
    /// the others stay held.
    @Test func heldReadsExpireAtTheirOwnDeadline() {
        var g = CatchUpGate(caughtUp: false, limits: limits)
        guard case .hold(let a) = g.arrive(now: 0), case .hold(let b) = g.arrive(now: 400),
              case .hold(let c) = g.arrive(now: 400) else { Issue.record("held"); return }
        let r8 = g.expire(now: 999)
        #expect(r8 == [])
        let r9 = g.expire(now: 1_000)
        #expect(r9 == [a])
        #expect(!g.isHeld(a) && g.isHeld(b) && g.isHeld(c))
        #expect(g.nextDeadline == 1_400)
        let r10 = g.expire(now: 5_000)
        #expect(r10 == [b, c])
        #expect(g.heldCount == 0 && !g.caughtUp)
        let r11 = g.reachedCatchUp()
        #expect(r11 == [], "expired reads are not released again")
    }

    /// A node removed from the cluster never catches up: every held read is refused at once.
    @Test func refuseAllEndsEveryHeldRead() {
        var g = CatchUpGate(caughtUp: false, limits: limits)
        guard case .hold(let a) = g.arrive(now: 0), case .hold(let b) = g.arrive(now: 1) else { Issue.record("held"); return }
        let refused = g.refuseAll()
        #expect(refused == [a, b] && g.heldCount == 0 && !g.caughtUp)
        #expect(CatchUpGate.Refusal.removed.reason.contains("removed"))
    }

    /// Seeded interleavings of arrivals, departures, expiries and the catch-up: the held count
    /// never passes the limit, every id ends exactly once (released, expired or left), and no
    /// read is held after the catch-up.
    @Test func seededInterleavingsAccountForEveryRead() {
        var rng = TestSeed.generator(0xca7c)
        for _ in 0..<200 {
            let maxHeld = Int(rng.next() % 6)
            var g = CatchUpGate(caughtUp: false, limits: .init(maxHeld: maxHeld, maxWaitMillis: Int64(rng.next() % 50)))
            var now: Int64 = 0
            var open: Set<UInt64> = []
            var ended: Set<UInt64> = []
            var caughtUpAt: Int?
            for step in 0..<100 {
                now += Int64(rng.next() % 10)
                switch rng.next() % 10 {
                case 0..<5:
                    switch g.arrive(now: now) {
                    case .proceed: #expect(caughtUpAt != nil)
                    case .hold(let id):
                        #expect(caughtUpAt == nil)
                        #expect(open.insert(id).inserted && !ended.contains(id))
                    case .refuse(.tooManyHeld(let n)): #expect(n == maxHeld && open.count == maxHeld)
                    case .refuse: Issue.record("arrive refuses only for the count")
                    }
                case 5..<7:
                    if !open.isEmpty {
                        let id = open.sorted()[Int(rng.next() % UInt64(open.count))]
                        let r12 = g.leave(id)
                        #expect(r12)
                        open.remove(id)
                        ended.insert(id)
                    }
                case 7..<9:
                    for id in g.expire(now: now) {
                        #expect(open.remove(id) != nil)
                        ended.insert(id)
                    }
                default:
                    if caughtUpAt == nil && rng.next() % 3 == 0 {
                        let released = g.reachedCatchUp()
                        #expect(Set(released) == open && released == released.sorted())
                        ended.formUnion(released)
                        open = []
                        caughtUpAt = step
                    }
                }
                #expect(g.heldCount == open.count && g.heldCount <= maxHeld)
                #expect(open.allSatisfy { g.isHeld($0) })
            }
        }
    }
}
