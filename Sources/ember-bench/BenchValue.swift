/// The value of write number `n`: exactly `size` bytes (more only if `n` has more digits),
/// different for every write. A fixed value would make every write after the first one per key
/// an identical write, which the store recognises and skips (no tree, version or index change):
/// the benchmark would measure logging alone.
func benchValue(_ n: Int, size: Int) -> String {
    let digits = String(n)
    return digits.count >= size ? digits : String(repeating: "x", count: size - digits.count) + digits
}

/// The key of write number `n` under a writer's parent: one of 1,000 keys rewritten in turn, or,
/// with `inserts`, a new key every time in increasing key order (zero-padded, so each lands
/// after the previous one, as push ids do).
func benchKey(_ n: Int, inserts: Bool) -> String {
    guard inserts else { return "k\(n % 1000)" }
    let digits = String(n)
    return "k" + String(repeating: "0", count: max(0, 12 - digits.count)) + digits
}
