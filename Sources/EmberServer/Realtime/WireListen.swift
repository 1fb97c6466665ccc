import EmberCore
import EmberProtocol

/// One listen of a connection (its name and limits are the protocol's: `WireServerSession`): a
/// location with a query. Untagged listens forward changes as they come; tagged (filtered) ones
/// keep the location's data to compute their window and send only the children that enter, leave
/// or change in it.
struct WireListen: WireServerListen {
    let path: Path
    let query: QuerySpec
    /// The client's `q` object as sent, echoed in `c` (revocation) messages.
    let queryWire: JSON?
    let tag: Int64?
    /// Full location data (tagged listens only).
    var cache: Node = .empty
    /// Children last sent for the window (tagged listens only).
    var window: KeyMap<Node> = [:]
    /// Changes that arrived while the initial read was under way; nil once active.
    var pending: [CommittedChange]? = []
    /// A read of the replaced state taken while the initial read was under way (`resync`): the
    /// initial data starts from whichever read is newer.
    var resyncRead: ReadResult?
    /// The last log index the listen's data includes (its read, and changes folded into it):
    /// a change up to it that reaches the listen later (published after the read saw it) is
    /// already in the client's data and is not sent again.
    var sentThrough: UInt64 = 0
    /// The location's version the client's data is at (the read's, then each change delivered):
    /// after a snapshot install an unchanged version means unchanged data, and nothing is sent.
    var sentVersion: UInt64 = 0

    var isTagged: Bool { tag != nil }

    func affects(_ change: CommittedChange) -> Bool {
        path.contains(change.path) || change.path.contains(path)
    }

    /// Starts the listen from a read of its location: the messages to send (data before `ok`).
    ///
    /// Changes that reached the connection while the read ran are folded into the initial data
    /// instead of being sent after it. Other listens of the connection may already have sent
    /// them, and a client applies every push to one cache: initial data older than a push it
    /// already got would roll that cache back (a filtered query above a parent listen then saw
    /// its window move back and forth: spurious child_removed/child_added).
    mutating func activate(with initialRead: ReadResult) -> [JSON] {
        var read = initialRead
        if let r = resyncRead, r.appliedIndex > read.appliedIndex { read = r }
        resyncRead = nil
        var data = read.node
        var version = read.version
        sentThrough = read.appliedIndex
        for change in pending ?? [] where change.index > read.appliedIndex {
            sentThrough = max(sentThrough, change.index)
            for ev in ChangeRouting.events(for: change, at: path) {
                switch ev {
                case .put(let rel, let node): data.set(node, at: rel)
                case .patch(let rel, let parts): for (p, n) in parts { data.set(n, at: rel.appending(p)) }
                }
            }
            version = max(version, change.index)
        }
        pending = nil
        sentVersion = version
        if isTagged {
            cache = data
            window = currentWindow()
            return [WireMessages.push(action: "d", path: path, data: Node(children: window).exportJSON(),
                                      tag: tag, version: version)]
        }
        return [WireMessages.push(action: "d", path: path, data: data.exportJSON(), tag: nil, version: version)]
    }

    /// The node's state was replaced (snapshot install): the listen's complete data again, as
    /// a new listen's initial data would be (`d`, tagged with the query's window for a tagged
    /// listen). A listen whose initial read is under way keeps the read for `activate`.
    mutating func resync(with read: ReadResult) -> [JSON] {
        if pending != nil {
            resyncRead = read
            // Changes queued so far precede the replaced state; the read supersedes them.
            pending = []
            return []
        }
        // Any change to the location's data raises its version (deletes leave theirs), so the
        // same version is the same data: the client already has it (no repeated event).
        if read.version == sentVersion {
            sentThrough = max(sentThrough, read.appliedIndex)
            return []
        }
        pending = []
        return activate(with: read)
    }

    /// True when `change` goes to the client now; false when unaffected, already in the
    /// client's data, or held until the initial read is done.
    /// `matched`: the hub's `PathIndex` found the listen for this change (it affects it).
    private mutating func admit(_ change: CommittedChange, matched: Bool = false) -> Bool {
        guard matched || affects(change) else { return false }
        if pending == nil, change.index <= sentThrough { return false }
        if pending != nil {
            pending!.append(change)
            return false
        }
        sentVersion = change.index
        return true
    }

    /// The messages a committed change produces for this listen (none when unaffected).
    mutating func apply(_ change: CommittedChange) -> [JSON] {
        guard admit(change) else { return [] }
        if !isTagged { return Self.untaggedMessages(for: change, at: path) }
        return applyTagged(change)
    }

    /// The frames `change` produces for this listen, untagged ones taken from `shared` (built
    /// once per path for all listens there).
    mutating func applyFrames(_ change: CommittedChange, shared: SharedFrames) -> [String] {
        guard admit(change) else { return [] }
        if !isTagged { return shared.untagged(at: path) }
        return applyTagged(change).flatMap { WireFraming.split($0.serialized()) }
    }

    /// What `change` means for this listen, for a publish that shares untagged frames.
    enum Delivery {
        case nothing
        /// The untagged frames of the listen's location (built once for all its listens).
        case shared
        /// A tagged listen's own window diff.
        case own([JSON])
    }

    /// As `applyFrames`, without building anything for an untagged listen: the caller takes
    /// the location's shared frames (already encoded for sockets). `matched`: the listen was
    /// found by the hub's `PathIndex` for this change, which only finds listens it affects.
    mutating func delivery(of change: CommittedChange, matched: Bool = false) -> Delivery {
        assert(!matched || affects(change), "the index finds only listens a change affects")
        guard admit(change, matched: matched) else { return .nothing }
        if !isTagged { return .shared }
        let messages = applyTagged(change)
        return messages.isEmpty ? .nothing : .own(messages)
    }

    /// An untagged listen's pushes for `change`: a function of the change and the path only.
    static func untaggedMessages(for change: CommittedChange, at path: Path) -> [JSON] {
        ChangeRouting.events(for: change, at: path).map { ev in
            switch ev {
            case .put(let rel, let data):
                return WireMessages.push(action: "d", path: path.appending(rel), data: data.exportJSON(), tag: nil, version: change.index)
            case .patch(let rel, let parts):
                var obj: KeyMap<JSON> = [:]
                for (p, n) in parts { obj[p.segments.joined(separator: "/")] = n.exportJSON() }
                return WireMessages.push(action: "m", path: path.appending(rel), data: .object(obj), tag: nil, version: change.index)
            }
        }
    }

    /// A tagged listen's window diff for `change` (an active listen the change affects).
    private mutating func applyTagged(_ change: CommittedChange) -> [JSON] {
        let events = ChangeRouting.events(for: change, at: path)
        for ev in events {
            switch ev {
            case .put(let rel, let data): cache.set(data, at: rel)
            case .patch(let rel, let parts): for (p, n) in parts { cache.set(n, at: rel.appending(p)) }
            }
        }
        let next = currentWindow()
        var diff: KeyMap<JSON> = [:]
        for (k, _) in window where next[k] == nil { diff[k] = .null }
        for (k, v) in next where !(window[k]?.isIdentical(to: v) ?? false) { diff[k] = v.exportJSON() }
        window = next
        guard !diff.isEmpty else { return [] }
        return [WireMessages.push(action: "m", path: path, data: .object(diff), tag: tag, version: change.index)]
    }

    private func currentWindow() -> KeyMap<Node> {
        guard cache.hasChildren else { return [:] }
        var w: KeyMap<Node> = [:]
        for (k, n) in query.window(of: cache) { w[k] = n }
        return w
    }
}
