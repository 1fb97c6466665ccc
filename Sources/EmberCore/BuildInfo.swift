/// What this build is and which on-disk and on-wire levels it reads and writes: the facts an
/// operator needs before running two builds side by side in one cluster (deploy/OPERATIONS.md,
/// "Versions and upgrades"). `emberd --version`, `ember --version`, `/.ember/status` ("build")
/// and `/metrics` (`ember_build_info`) print them from here, so they cannot disagree.
///
/// A level changes only when an older build could not read what a newer one writes; the
/// version changes with every release (CHANGELOG.md, one git tag `vX.Y.Z` per release).
public enum BuildInfo {
    /// Semantic version of this build. Bump it in the same commit as CHANGELOG.md's entry.
    /// Between releases it is the next one with `-dev`, so a build off main never passes for
    /// the last release (`make upgrade-test` tells them apart by it).
    public static let version = "0.8.0-dev"

    /// The data directory's layout. 1: one tree record per leaf, index rows with full values
    /// (builds up to main 7450d4b). 2: small objects as inline records, index rows keyed by
    /// their value (0.3.0 on). 3: text in keys (path segments, index strings) stored in UTF-16
    /// order, `KeyOrder.textOrderByte` (0.5.0 on). 4: index rows keyed by a small location id instead
    /// of the location's key (`idxloc`; 0.7.0). 5: a trigger group's change record may be
    /// compact, its values rebuilt from the log entry (`TriggerCompactRecord`; the release after
    /// 0.7.0: 0.7.0 would stop on one, so it refuses the directory instead; nothing to migrate).
    /// 6: a compact record's locations relative to its entry's path and its pattern's
    /// wildcards (`TriggerCompactRecord.format`; 0.8.0: format 5's records are still read as
    /// they are, so nothing to migrate; a format-5 build refuses the directory). Snapshots carry
    /// full records only, so members of either format install each other's.
    /// 7: the shared change records in a table of their own keyed by log index first
    /// (`TriggerRecordRows`; 0.8.0: a format-6 directory's records move there when it opens; a
    /// format-6 build refuses the directory). Snapshots carry them in format 6's layout.
    /// A build opens every level up to `storageFormat` (older ones are
    /// migrated in place when the directory opens) and refuses a directory marked newer.
    public static let storageFormat = 7
    /// The oldest storage format this build still opens (and migrates).
    public static let oldestStorageFormat = 1

    /// The peer (Raft) protocol between members. 1: the original messages. 2: adds the leader's
    /// durable notice, offered by ALPN (`ember-peer/2`) and used only with peers that accepted it.
    /// 3: the corruption check's hash frames and their request form (0.5.1 on). 4: reads the
    /// trigger cursors' `advance` log entry (the release after 0.6.0). 5: reads the `updateText`
    /// log entry (a bulk update's parts as their JSON text; the release after 0.7.0). A build speaks
    /// every level from `oldestPeerProtocol` to `peerProtocol`, so two builds whose ranges
    /// overlap may run in one cluster.
    public static let peerProtocol = 5
    /// The oldest peer protocol level this build still speaks (to members of older builds).
    public static let oldestPeerProtocol = 1

    /// The client protocols served (unchanged across Ember releases: Firebase's).
    public static let clientProtocols = "REST, SSE, WebSocket wire protocol v5"

    /// The multi-line text of `--version`.
    public static func describe(program: String) -> String {
        """
        \(program) \(version)
        storage format \(storageFormat) (opens \(oldestStorageFormat)-\(storageFormat); older are migrated when opened)
        peer protocol \(peerProtocol) (speaks \(oldestPeerProtocol)-\(peerProtocol))
        client protocols: \(clientProtocols)
        """
    }

    /// The levels, as numbers (`/.ember/status`'s "build" object carries them as such).
    public static var levels: [(name: String, value: Int)] {
        [("storageFormat", storageFormat), ("oldestStorageFormat", oldestStorageFormat),
         ("peerProtocol", peerProtocol), ("oldestPeerProtocol", oldestPeerProtocol)]
    }

    /// The version and the levels as text: `ember_build_info`'s labels.
    public static var fields: [(name: String, value: String)] {
        [("version", version)] + levels.map { ($0.name, String($0.value)) }
    }
}
