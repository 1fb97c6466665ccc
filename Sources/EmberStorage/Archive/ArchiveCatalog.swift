/// Object names of the archive and what can be decided from a listing alone (pure: no I/O;
/// the time is an input): the recoverable window, gaps, a restore's plan, retention.
///
/// Names: `seg-<first>-<last>-<firstMs>-<lastMs>.ems` (indexes 20 digits, times 15 digits:
/// lexical order is index order) and `base-<index>-<ms>.embk` (a backup file of the state at
/// that index; `ms` the latest entry time it holds).
public enum ArchiveName {
    public static func segment(first: UInt64, last: UInt64, firstTimestamp: Int64, lastTimestamp: Int64) -> String {
        "seg-\(pad(first, 20))-\(pad(last, 20))-\(pad(UInt64(max(0, firstTimestamp)), 15))-\(pad(UInt64(max(0, lastTimestamp)), 15)).ems"
    }

    public static func base(index: UInt64, timestamp: Int64) -> String {
        "base-\(pad(index, 20))-\(pad(UInt64(max(0, timestamp)), 15)).embk"
    }

    static func pad(_ v: UInt64, _ width: Int) -> String {
        let s = String(v)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }

    /// A parsed name; nil for any other object (temporary files, foreign objects).
    public static func parse(_ name: String) -> ArchiveCatalog.Object? {
        if name.hasPrefix("seg-"), name.hasSuffix(".ems") {
            let parts = name.dropFirst(4).dropLast(4).split(separator: "-")
            guard parts.count == 4, let f = UInt64(parts[0]), let l = UInt64(parts[1]), let ft = Int64(parts[2]),
                  let lt = Int64(parts[3]), l >= f else { return nil }
            return .init(name: name, kind: .segment, first: f, last: l, firstTimestamp: ft, lastTimestamp: lt)
        }
        if name.hasPrefix("base-"), name.hasSuffix(".embk") {
            let parts = name.dropFirst(5).dropLast(5).split(separator: "-")
            guard parts.count == 2, let i = UInt64(parts[0]), let t = Int64(parts[1]) else { return nil }
            return .init(name: name, kind: .base, first: i, last: i, firstTimestamp: t, lastTimestamp: t)
        }
        return nil
    }
}

public struct ArchiveCatalog: Sendable, Equatable {
    public struct Object: Sendable, Equatable {
        public enum Kind: String, Sendable { case segment, base }
        public var name: String
        public var kind: Kind
        /// Segment: its index range. Base: the index of its state (first == last).
        public var first: UInt64
        public var last: UInt64
        public var firstTimestamp: Int64
        public var lastTimestamp: Int64
    }

    /// A missing index range: entries `from...to` are in no segment.
    public struct Gap: Sendable, Equatable {
        public var from: UInt64
        public var to: UInt64
    }

    /// Segments in index order, bases in index order.
    public var segments: [Object]
    public var bases: [Object]

    public init(names: [String]) {
        let objects = names.compactMap(ArchiveName.parse)
        segments = objects.filter { $0.kind == .segment }.sorted { ($0.first, $0.last) < ($1.first, $1.last) }
        bases = objects.filter { $0.kind == .base }.sorted { ($0.first, $0.lastTimestamp) < ($1.first, $1.lastTimestamp) }
    }

    /// Index ranges between segments that no segment holds (from the first segment on).
    public var gaps: [Gap] {
        var out: [Gap] = []
        var end: UInt64? = nil
        for s in segments {
            if let e = end, s.first > e + 1 { out.append(Gap(from: e + 1, to: s.first - 1)) }
            end = max(end ?? 0, s.last)
        }
        return out
    }

    /// Segments whose index ranges overlap another's (a duplicate entry).
    public var overlaps: [(String, String)] {
        var out: [(String, String)] = []
        var prev: Object? = nil
        for s in segments {
            if let p = prev, s.first <= p.last { out.append((p.name, s.name)) }
            if prev == nil || s.last > prev!.last { prev = s }
        }
        return out
    }

    /// How to make segments that hold entries twice (writers racing at a leader change) hold each
    /// entry once, keeping every entry: `remove` segments the remaining others cover entirely (the
    /// longest first, ties by name, so writers looking at the same listing decide alike), then
    /// `trim` each segment that still starts inside the one before it (neither covers the other)
    /// to start after it, keeping its end and the state hash recorded there. The entries at an
    /// index are the same committed ones in every segment, so restores stay exact.
    public struct Cleanup: Sendable, Equatable {
        public var remove: [Object] = []
        public var trim: [Trim] = []
        public var isEmpty: Bool { remove.isEmpty && trim.isEmpty }
    }

    public struct Trim: Sendable, Equatable {
        public var segment: Object
        /// The trimmed segment's first index (`segment.last` stays).
        public var from: UInt64
    }

    public var cleanup: Cleanup {
        let overlapping = Set(overlaps.flatMap { [$0.0, $0.1] })
        guard !overlapping.isEmpty else { return Cleanup() }
        var out = Cleanup()
        var kept = segments
        let candidates = segments.filter { overlapping.contains($0.name) }
            .sorted { ($0.last - $0.first, $1.name) > ($1.last - $1.first, $0.name) }
        for s in candidates where s.first > 0 {
            var end = s.first - 1
            for o in kept where o.name != s.name && o.last >= s.first && o.first <= s.last {
                if o.first > end + 1 { break }
                end = max(end, o.last)
            }
            if end >= s.last {
                out.remove.append(s)
                kept.removeAll { $0.name == s.name }
            }
        }
        var end: UInt64? = nil
        for s in kept {
            if let e = end, s.first <= e, s.last > e { out.trim.append(Trim(segment: s, from: e + 1)) }
            end = max(end ?? 0, s.last)
        }
        return out
    }

    /// The last index the segments hold without a gap after `index` (index itself when none follows).
    public func continuousEnd(after index: UInt64) -> UInt64 {
        var end = index
        for s in segments where s.last > end {
            if s.first > end + 1 { break }
            end = s.last
        }
        return end
    }

    /// A restorable stretch: from a base, the entries that follow it without a gap.
    public struct Window: Sendable, Equatable {
        public var base: Object
        /// The last index restorable from `base`, and the time of the latest entry up to it.
        public var endIndex: UInt64
        public var endTimestamp: Int64
    }

    /// One window per base (older bases first); the recoverable range is from the oldest base to
    /// the last window's end. Bases whose windows overlap form one range.
    public var windows: [Window] {
        bases.map { b in
            let end = continuousEnd(after: b.first)
            let ts = segments.filter { $0.first <= end && $0.last > b.first }.map(\.lastTimestamp).max() ?? 0
            return Window(base: b, endIndex: end, endTimestamp: max(ts, b.lastTimestamp))
        }
    }

    public enum Target: Sendable, Equatable, CustomStringConvertible {
        case index(UInt64)
        /// ms since 1970: the state after the last entry whose time is at or before it.
        case time(Int64)

        public var description: String {
            switch self {
            case .index(let i): return "index \(i)"
            case .time(let t): return "time \(ArchiveTime.format(t))"
            }
        }
    }

    /// What a restore needs: the base, and the segments after it in order up to the one that
    /// holds the target (a time target may stop inside an earlier one: the replay decides).
    public struct Plan: Sendable, Equatable {
        public var base: Object
        public var segments: [Object]
    }

    /// The newest base at or before the target and the unbroken chain of segments from it.
    /// Refuses a target outside every window, or one a gap cuts off: never an older state.
    public func plan(_ target: Target) throws(ArchiveError) -> Plan {
        guard let oldest = bases.first else { throw ArchiveError("the archive holds no base snapshot") }
        let base: Object
        switch target {
        case .index(let i):
            guard let b = bases.last(where: { $0.first <= i }) else {
                throw ArchiveError("index \(i) is before the archive's window (its oldest base is at index \(oldest.first))")
            }
            base = b
        case .time(let t):
            guard let b = bases.last(where: { $0.lastTimestamp <= t }) else {
                throw ArchiveError("\(ArchiveTime.format(t)) is before the archive's window (its oldest base is at \(ArchiveTime.format(oldest.lastTimestamp)))")
            }
            base = b
        }
        var chain: [Object] = []
        var end = base.first
        func reached() -> Bool {
            switch target {
            case .index(let i): return end >= i
            case .time(let t): return chain.last.map { $0.lastTimestamp > t } ?? false
            }
        }
        while !reached() {
            // The longest segment that continues the chain (ranges may overlap after a crash).
            guard let next = segments.filter({ $0.first <= end + 1 && $0.last > end }).max(by: { $0.last < $1.last }) else {
                if segments.contains(where: { $0.first > end + 1 }) {
                    throw ArchiveError("gap in the archive after index \(end): it cannot restore \(target) from base \(base.name)")
                }
                // A time target at the archive's last entry time is inside it (no later entry is known).
                if case .time(let t) = target, (chain.last?.lastTimestamp ?? base.lastTimestamp) >= t { break }
                throw ArchiveError("\(target) is after the archive's end (index \(end)\(chain.last.map { ", \(ArchiveTime.format($0.lastTimestamp))" } ?? ""))")
            }
            chain.append(next)
            end = next.last
        }
        return Plan(base: base, segments: chain)
    }

    /// What retention removes at `now` (ms) with `retentionMs`: every object older than the
    /// window's start, except the newest base at or before it and the segments after that base.
    /// Keeps everything when no base is old enough (the window must stay restorable).
    public func expired(now: Int64, retentionMs: Int64) -> [String] {
        let start = now - retentionMs
        guard let keep = bases.last(where: { $0.lastTimestamp <= start }) else { return [] }
        var out = bases.filter { $0.first < keep.first || ($0.first == keep.first && $0.name < keep.name) }.map(\.name)
        out += segments.filter { $0.last <= keep.first }.map(\.name)
        return out
    }
}

/// RFC 3339 with milliseconds in UTC (`2026-11-28T12:34:56.789Z`), without Foundation.
public enum ArchiveTime {
    public static func format(_ ms: Int64) -> String {
        let days = Int64((Double(ms) / 86_400_000).rounded(.down))
        var rem = ms - days * 86_400_000
        let h = rem / 3_600_000; rem %= 3_600_000
        let m = rem / 60_000; rem %= 60_000
        let s = rem / 1000, f = rem % 1000
        let (y, mo, d) = civil(days)
        func p(_ v: Int64, _ w: Int) -> String { ArchiveName.pad(UInt64(max(0, v)), w) }
        return "\(p(y, 4))-\(p(mo, 2))-\(p(d, 2))T\(p(h, 2)):\(p(m, 2)):\(p(s, 2)).\(p(f, 3))Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`; nil for anything else.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func num(_ from: Int, _ n: Int) -> Int64? {
            guard from + n <= b.count else { return nil }
            var v: Int64 = 0
            for c in b[from..<(from + n)] {
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            return v
        }
        guard b.count >= 20, b[4] == 45, b[7] == 45, b[10] == 84 || b[10] == 116, b[13] == 58, b[16] == 58,
              let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2),
              let s = num(17, 2), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61 else { return nil }
        var i = 19
        var frac: Int64 = 0
        if i < b.count && b[i] == 46 {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if digits < 3 { frac = frac * 10 + Int64(b[i] - 48) }
                digits += 1; i += 1
            }
            guard digits > 0 else { return nil }
            for _ in 0..<max(0, 3 - digits) { frac *= 10 }
        }
        var offset: Int64 = 0
        guard i < b.count else { return nil }
        if b[i] == 90 || b[i] == 122 {
            i += 1
        } else if b[i] == 43 || b[i] == 45, let oh = num(i + 1, 2), b.count > i + 3, b[i + 3] == 58, let om = num(i + 4, 2) {
            offset = (oh * 60 + om) * 60_000 * (b[i] == 43 ? 1 : -1)
            i += 6
        } else { return nil }
        guard i == b.count else { return nil }
        let days = daysFromCivil(y, mo, d)
        return days * 86_400_000 + h * 3_600_000 + mi * 60_000 + s * 1000 + frac - offset
    }

    // Howard Hinnant's civil-calendar arithmetic (the published algorithm).
    static func daysFromCivil(_ y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(_ z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}
