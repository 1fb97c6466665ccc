/// Firebase push ids: 8 characters of millisecond time then 12 random characters in a 64-character
/// alphabet whose ASCII order is its numeric order, so ids sort by creation. Within one
/// millisecond (or if the clock steps back) the previous random part is incremented, so ids from
/// one generator are strictly increasing. Pure: time and randomness are inputs.
public struct PushIDGenerator: Sendable {
    public static let alphabet = Array("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz".utf8)

    private var lastTime: Int64 = -1
    private var lastRandom = [Int](repeating: 0, count: 12)

    public init() {}

    public mutating func next<R: RandomNumberGenerator>(now: Int64, using rng: inout R) -> String {
        var time = max(now, lastTime)
        if time == lastTime {
            // Increment the random digits as a base-64 number; a full carry moves time on by 1 ms.
            var i = 11
            while i >= 0 && lastRandom[i] == 63 {
                lastRandom[i] = 0
                i -= 1
            }
            if i >= 0 {
                lastRandom[i] += 1
            } else {
                time += 1
                for j in 0..<12 { lastRandom[j] = Int.random(in: 0..<64, using: &rng) }
            }
        } else {
            for j in 0..<12 { lastRandom[j] = Int.random(in: 0..<64, using: &rng) }
        }
        lastTime = time
        var chars = [UInt8](repeating: 0, count: 20)
        var t = time
        for i in stride(from: 7, through: 0, by: -1) {
            chars[i] = Self.alphabet[Int(t % 64)]
            t /= 64
        }
        for j in 0..<12 { chars[8 + j] = Self.alphabet[lastRandom[j]] }
        return String(decoding: chars, as: UTF8.self)
    }

    /// The millisecond timestamp encoded in a push id, if it is one.
    public static func timestamp(of id: String) -> Int64? {
        let u = Array(id.utf8)
        guard u.count == 20 else { return nil }
        var t: Int64 = 0
        for c in u[0..<8] {
            guard let d = alphabet.firstIndex(of: c) else { return nil }
            t = t * 64 + Int64(d)
        }
        return t
    }
}
