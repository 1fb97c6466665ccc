import ArgumentParser
import EmberCore

/// `ember`: the admin CLI. Talks to nodes over their REST API (data, status, membership,
/// backups) and makes cluster certificates locally. Every failure exits non-zero with one line
/// `ember: <reason>` on stderr; `--json` switches output to machine-readable JSON.
@main
struct Ember: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ember",
        abstract: "Administer Ember nodes and clusters.",
        version: BuildInfo.describe(program: "ember"),
        subcommands: [
            GetCommand.self, SetCommand.self, UpdateCommand.self, PushCommand.self, DeleteCommand.self,
            WatchCommand.self, ExportCommand.self, ImportCommand.self, RulesCommand.self,
            StatusCommand.self, MembersCommand.self, LeaderCommand.self,
            BackupCommand.self, RestoreCommand.self, CertsCommand.self, StatsCommand.self, CompactCommand.self,
            DefragCommand.self, CheckCommand.self, ArchiveCommand.self, TriggersCommand.self, FeedCommand.self,
        ])
}
