import Foundation

/// The ratios of paired runs (with / without, each pair run back to back in alternating order)
/// and what they allow one to say on a machine whose noise is as large as the effect: the
/// median, the spread, and an interval for the median from the order statistics alone (no
/// assumption on the noise's shape: each ratio is as likely above the true median as below).
struct PairedRatios {
    let sorted: [Double]

    /// The confidence the median's interval aims for (the widest-but-one order statistics that
    /// reach it; with few pairs the outermost ones, at the confidence they give).
    static let targetConfidence = 0.90

    init(_ ratios: [Double]) {
        precondition(!ratios.isEmpty, "no pairs")
        sorted = ratios.sorted()
    }

    var median: Double { quantile(0.5) }

    /// The `q` quantile, interpolated between neighbouring order statistics.
    func quantile(_ q: Double) -> Double {
        let pos = q * Double(sorted.count - 1)
        let i = Int(pos.rounded(.down)), frac = pos - Double(i)
        return i + 1 < sorted.count ? sorted[i] + frac * (sorted[i + 1] - sorted[i]) : sorted[i]
    }

    /// [x(k), x(n+1-k)] covers the median with probability 1 − 2·P(Binomial(n, ½) ≤ k−1):
    /// the largest k reaching `targetConfidence`, or k = 1 (at its own confidence) when none does.
    var medianInterval: (low: Double, high: Double, confidence: Double) {
        let n = sorted.count
        var best = (k: 1, confidence: Self.coverage(n: n, k: 1))
        var k = 2
        while 2 * k <= n + 1 {
            let c = Self.coverage(n: n, k: k)
            if c < Self.targetConfidence { break }
            best = (k, c)
            k += 1
        }
        return (sorted[best.k - 1], sorted[n - best.k], best.confidence)
    }

    static func coverage(n: Int, k: Int) -> Double {
        var tail = 0.0, choose = 1.0  // C(n, i)
        for i in 0..<k {
            tail += choose
            choose = choose * Double(n - i) / Double(i + 1)
        }
        return max(0, 1 - 2 * tail / pow(2, Double(n)))
    }

    /// Whether "at most `maxLossPercent` less" holds: decided when the median's whole interval is
    /// on one side of it (with at least `targetConfidence`: five pairs or more), otherwise not
    /// settled by these pairs (the median alone says which way it leans).
    func verdict(maxLossPercent: Double) -> String {
        let floor = 1 - maxLossPercent / 100
        let (low, high, confidence) = medianInterval
        let leaning = "(the median alone: " + (median >= floor ? "met)" : "NOT met)")
        guard confidence >= Self.targetConfidence else { return "not settled: too few pairs " + leaning }
        if low >= floor { return String(format: "met at %.0f %% confidence", 100 * confidence) }
        if high < floor { return String(format: "NOT met at %.0f %% confidence", 100 * confidence) }
        return "not settled by these pairs " + leaning
    }
}
