import ArgumentParser
import Foundation

/// A failure reported as one line on stderr with a non-zero exit.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Runs a command body; any error becomes `ember: <reason>` and exit status 1.
func runCLI(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let e as ExitCode {
        throw e
    } catch {
        let text: String
        switch error {
        case let e as CLIError: text = e.description
        case let e as CustomStringConvertible: text = e.description
        default: text = "\(error)"
        }
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        FileHandle.standardError.write(Data("ember: \(line)\n".utf8))
        throw ExitCode.failure
    }
}

/// Writes a line to stdout now (stdout may be a pipe, where `print` would buffer).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func note(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// A plain text table: left-aligned columns separated by two spaces.
func renderTable(header: [String], rows: [[String]]) -> String {
    var widths = header.map(\.count)
    for r in rows { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { i, c in i == cells.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
            .joined(separator: "  ")
    }
    return ([line(header)] + rows.map(line)).joined(separator: "\n")
}

/// A progress line on stderr (`\r`-redrawn at most every 100 ms), ended by `finish`.
final class TransferProgress {
    let label: String
    let total: Int64?
    let enabled: Bool
    private(set) var done: Int64 = 0
    private var lastDraw = Date.distantPast

    init(_ label: String, total: Int64?, enabled: Bool = true) {
        self.label = label
        self.total = total
        self.enabled = enabled
    }

    func advance(_ n: Int) {
        done += Int64(n)
        let now = Date()
        if now.timeIntervalSince(lastDraw) >= 0.1 { draw(); lastDraw = now }
    }

    func finish() {
        guard enabled else { return }
        draw()
        FileHandle.standardError.write(Data("\n".utf8))
    }

    private func draw() {
        guard enabled else { return }
        var text = "\r\(label) "
        if let total, total > 0 {
            let frac = min(1, Double(done) / Double(total))
            let width = 30
            let filled = Int(frac * Double(width))
            text += "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
            text += String(format: "%3.0f%% ", frac * 100) + "\(Self.size(done))/\(Self.size(total))"
        } else {
            text += Self.size(done)
        }
        FileHandle.standardError.write(Data(text.utf8))
    }

    static func size(_ n: Int64) -> String {
        if n < 1024 { return "\(n) B" }
        if n < 1 << 20 { return String(format: "%.1f KiB", Double(n) / 1024) }
        if n < 1 << 30 { return String(format: "%.1f MiB", Double(n) / 1048576) }
        return String(format: "%.2f GiB", Double(n) / 1073741824)
    }
}

/// Reads a JSON argument: literal text, `@FILE`, or `-` for stdin.
func readValueArgument(_ arg: String) throws -> [UInt8] {
    if arg == "-" { return Array(FileHandle.standardInput.readDataToEndOfFile()) }
    if arg.hasPrefix("@") {
        let path = String(arg.dropFirst())
        guard let d = FileManager.default.contents(atPath: path) else { throw CLIError("cannot read \(path)") }
        return Array(d)
    }
    return Array(arg.utf8)
}
