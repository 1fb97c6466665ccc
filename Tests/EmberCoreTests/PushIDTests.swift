import Testing
import EmberTestSupport
@testable import EmberCore

@Suite("Push ids", .printsSeedOnFailure)
struct PushIDTests {
    static let alphabet = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"

    @Test("the alphabet is 64 characters in ASCII order")
    func alphabet() {
        #expect(PushIDGenerator.alphabet == Array(Self.alphabet.utf8))
        #expect(PushIDGenerator.alphabet.count == 64)
        #expect(PushIDGenerator.alphabet == PushIDGenerator.alphabet.sorted())
    }

    @Test("20 characters from the alphabet, timestamp in the first 8")
    func shape() {
        var gen = PushIDGenerator()
        var rng = TestSeed.generator(7)
        let allowed = Set(Self.alphabet.utf8)
        for now: Int64 in [0, 1, 63, 64, 1_700_000_000_000, 281_474_976_710_655] {
            let id = gen.next(now: now, using: &rng)
            #expect(id.utf8.count == 20)
            #expect(id.utf8.allSatisfy(allowed.contains))
            #expect(PushIDGenerator.timestamp(of: id) == now)
        }
    }

    @Test("timestamp encoding matches known ids")
    func knownTimestamps() {
        // 0 ms is all '-'; 1 ms ends in '0'; 64 ms ends in "0-".
        var gen = PushIDGenerator()
        var rng = TestSeed.generator(1)
        #expect(gen.next(now: 0, using: &rng).hasPrefix("--------"))
        #expect(gen.next(now: 1, using: &rng).hasPrefix("-------0"))
        #expect(gen.next(now: 64, using: &rng).hasPrefix("------0-"))
        // The documentation's sample ids decode to plausible times (2013–2014).
        let t1 = PushIDGenerator.timestamp(of: "-JSOpn9ZC54A4P4RoqVa")
        let t2 = PushIDGenerator.timestamp(of: "-INOQPH-aV_psbk3ZXEX")
        #expect(t1 != nil && t2 != nil)
        if let t1, let t2 {
            #expect(t1 > 1_356_998_400_000 && t1 < 1_420_070_400_000)  // 2013-01-01 ... 2015-01-01
            #expect(t2 > 1_325_376_000_000 && t2 < t1)
        }
        #expect(PushIDGenerator.timestamp(of: "short") == nil)
        #expect(PushIDGenerator.timestamp(of: "!JSOpn9ZC54A4P4RoqVa") == nil)
        #expect(PushIDGenerator.timestamp(of: "-JSOpn9ZC54A4P4RoqVa0") == nil)
    }

    @Test("strictly increasing across 10,000 ids in the same millisecond")
    func sameMillisecond() {
        var gen = PushIDGenerator()
        var rng = TestSeed.generator(99)
        var last = ""
        for i in 0..<10_000 {
            let id = gen.next(now: 1_700_000_000_000, using: &rng)
            #expect(KeyOrder.compareText(last, id) < 0, "id \(i)")
            #expect(KeyOrder.compare(last, id) < 0 || i == 0)
            last = id
        }
    }

    @Test("strictly increasing across time steps and when the clock goes backwards")
    func timeSteps() {
        var gen = PushIDGenerator()
        var rng = TestSeed.generator(2024)
        var clock: Int64 = 1_700_000_000_000
        var last = ""
        var ids: [String] = []
        for i in 0..<5_000 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5: break  // same millisecond
            case 5..<8: clock += Int64.random(in: 1...1000, using: &rng)
            default: clock -= Int64.random(in: 1...5000, using: &rng)  // NTP step backwards
            }
            let id = gen.next(now: clock, using: &rng)
            #expect(KeyOrder.compareText(last, id) < 0, "id \(i) at \(clock)")
            last = id
            ids.append(id)
        }
        #expect(Set(ids).count == ids.count)
        // Timestamps never decrease.
        let times = ids.map { PushIDGenerator.timestamp(of: $0)! }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 })
    }

    @Test("a full carry of the random part moves time forward by 1 ms and stays increasing")
    func fullCarry() {
        // An RNG that always yields the top digit makes the random part start at "zzzzzzzzzzzz".
        struct MaxRNG: RandomNumberGenerator { mutating func next() -> UInt64 { .max } }
        var rng = MaxRNG()
        var gen = PushIDGenerator()
        let a = gen.next(now: 1000, using: &rng)
        #expect(a.hasSuffix("zzzzzzzzzzzz"))
        let b = gen.next(now: 1000, using: &rng)
        #expect(KeyOrder.compareText(a, b) < 0)
        #expect(PushIDGenerator.timestamp(of: b) == 1001)
        let c = gen.next(now: 1000, using: &rng)
        #expect(KeyOrder.compareText(b, c) < 0)
    }

    @Test("same seed, same ids")
    func deterministic() {
        func run() -> [String] {
            var gen = PushIDGenerator()
            var rng = TestSeed.generator(5)
            return (0..<50).map { gen.next(now: 1_000 + Int64($0 / 10), using: &rng) }
        }
        #expect(run() == run())
    }

    @Test("push ids sort as strings in key order, after integer keys")
    func keyGroup() {
        var gen = PushIDGenerator()
        var rng = TestSeed.generator(3)
        let id = gen.next(now: 1_700_000_000_000, using: &rng)
        #expect(KeyOrder.int32Value(id) == nil)
        #expect(KeyOrder.compare("2147483647", id) < 0)
        #expect(Key.isValid(id))
    }
}
