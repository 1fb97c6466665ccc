/// The value of write number `n`: exactly `size` bytes (more only if `n` has more digits),
/// different for every write. A fixed value would make every write after the first one per key
/// an identical write, which the store recognises and skips (no tree, version or index change):
/// the benchmark would measure logging alone.
func benchValue(_ n: Int, size: Int) -> String {
    let digits = String(n)
    return digits.count >= size ? digits : String(repeating: "x", count: size - digits.count) + digits
}
