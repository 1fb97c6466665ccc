/// The seeded source of a connection's node choices (`NodeList`): SplitMix64, so a seed replays
/// the same choices (tests pick seeds; an app gets a random one per database).
struct NodeChoiceRandom: Sendable, Equatable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform enough in 0..<bound (the modulo bias over 2^64 is negligible for a node count).
    mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0, "a choice needs at least one option")
        return Int(next() % UInt64(bound))
    }

    /// A uniformly shuffled copy (Fisher-Yates).
    mutating func shuffled<T>(_ items: [T]) -> [T] {
        var out = items
        var i = out.count - 1
        while i > 0 {
            out.swapAt(i, below(i + 1))
            i -= 1
        }
        return out
    }
}
