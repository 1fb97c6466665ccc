// A client process for the persistence tests: it runs one scenario with persistence on, prints
// what it sees as lines on stdout (`WORD payload`), and then waits to be killed (SIGKILL), the way
// an app is stopped. Usage: ember-persistence-probe COMMAND DATABASE_URL CACHE_DIR [ARGS…]
import EmberClient
import Foundation
import Logging
import Synchronization

// Persistence reports (errors about the cache file) go to stderr, where the tests read them.
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .info
    return handler
}

let args = CommandLine.arguments
guard args.count >= 4 else {
    FileHandle.standardError.write(Data("usage: ember-persistence-probe COMMAND URL DIR [ARGS]\n".utf8))
    exit(2)
}
let command = args[1]
let config = DatabaseConfiguration(reconnectPolicy: ReconnectPolicy(initial: .milliseconds(100), maximum: .milliseconds(300)))
let database = Database(url: args[2], configuration: config)
database.isPersistenceEnabled = true
database.persistenceDirectory = URL(fileURLWithPath: args[3], isDirectory: true)
Probe(db: database).run(command, Array(args.dropFirst(4)))

final class Tally: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { n in n += 1; return n } }
}

struct Probe: Sendable {
    let db: Database

    func say(_ word: String, _ payload: Any? = nil) {
        var line = word
        if let payload { line += " " + Probe.json(payload) }
        // Unbuffered: the test reads each line as it comes, and may kill the process next.
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func json(_ value: Any?) -> String {
        guard let value, !(value is NSNull) else { return "null" }
        if let s = value as? String { return "\"\(s)\"" }
        if let b = value as? Bool, type(of: value) == Bool.self { return b ? "true" : "false" }
        if !(value is [Any]), !(value is [String: Any]), let n = value as? NSNumber { return "\(n)" }
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]) else { return "?" }
        return String(decoding: data, as: UTF8.self)
    }

    /// Sets a marker and waits for its acknowledgement: writes are acknowledged in order, so every
    /// write made or restored before it has been acknowledged (and removed from the disk queue) too.
    func acknowledgeEverything() {
        db.reference(withPath: "markers").childByAutoId().setValue(true) { error, _ in
            say(error == nil ? "ACKED" : "ACKFAILED")
        }
    }

    func run(_ command: String, _ rest: [String]) {
        switch command {
        case "queue-writes":
            // N sets, pushes and multi-path updates while the server is unreachable.
            let count = Int(rest[0])!
            let log = db.reference(withPath: "log")
            for i in 0..<count {
                log.childByAutoId().setValue(["n": i])
                db.reference(withPath: "counter").setValue(i)
                db.reference().updateChildValues(["multi/a": i, "multi/b": i])
            }
            // Server values stay placeholders in the queue: the server resolves them when it
            // finally gets the write.
            db.reference(withPath: "stamp").setValue(ServerValue.timestamp())
            // Local events follow the disk writes on the client's queue: once they show all N,
            // all N are on disk. (Child events: with no server data `log` is not complete, so
            // a value event would wait for the server.)
            let seen = Tally()
            log.observe(.childAdded) { _ in
                if seen.next() == count { say("QUEUED", count) }
            }

        case "seed-then-offline":
            // Syncs `items` from the server, then goes offline and writes locally.
            let items = db.reference(withPath: "items")
            items.observe(.value) { snap in say("VALUE", snap.value) }
            db.reference(withPath: "markers/seed").setValue(true) { _, _ in
                // The listen's completion came before this acknowledgement: the cache is complete.
                say("SYNCED")
                db.goOffline()
                items.child("c").setValue(3)
                items.child("a").setValue(10)
            }

        case "show":
            // What a restarted app sees: `.info/connected`, a getData, a single event, a listener.
            let path = rest[0]
            db.reference(withPath: ".info/connected").observe(.value) { snap in
                say("CONNECTED", snap.value)
                if snap.value as? Bool == true { acknowledgeEverything() }
            }
            db.reference(withPath: path).child("b").observeSingleEvent(of: .value) { snap in say("SINGLE", snap.value) }
            db.reference(withPath: path).observe(.value) { snap in say("VALUE", snap.value) }
            db.reference(withPath: path).child("a").getData { error, snap in
                if let error { say("GETERR", "\(error)") } else { say("GET", snap.value) }
            }

        case "increments":
            // Once connected, waits for the test's go file, then makes N increments (sets and
            // multi-path updates) and says SENT. The test mutes the node's answers in between:
            // the node applies them, this client never hears they were acknowledged.
            let count = Int(rest[0])!, go = rest[1]
            let once = Tally()
            db.reference(withPath: ".info/connected").observe(.value) { snap in
                guard snap.value as? Bool == true, once.next() == 1 else { return }
                say("CONNECTED")
                while !FileManager.default.fileExists(atPath: go) { usleep(10_000) }
                for i in 0..<count {
                    if i % 2 == 0 {
                        db.reference(withPath: "count").setValue(ServerValue.increment(1))
                    } else {
                        db.reference().updateChildValues(["count": ServerValue.increment(1), "last": i])
                    }
                }
                say("SENT", count)
            }

        default:
            FileHandle.standardError.write(Data("unknown command \(command)\n".utf8))
            exit(2)
        }
    }
}

// Stay alive until killed.
while true { sleep(60) }
