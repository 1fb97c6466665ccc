import EmberCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
import Testing

@testable import EmberCluster
@testable import EmberNodeStore
@testable import EmberServer

/// Clients' reads run on the node's `ReadPool` (real EmberNode over a real LMDB store): while every
/// read thread is busy, writes are still answered; past the queue bound reads are refused with
/// REST 503 `{"error": ...}` / wire status `unavailable`; queued reads are answered afterwards.
@Suite struct ReadPoolTests {
    /// Blocks pool threads the way a long LMDB read does, until released.
    final class Hold: Sendable {
        let started = Atomic<Int>(0)
        let gate = DispatchSemaphore(value: 0)

        /// Occupies `n` threads of `pool`; returns once all `n` are blocked on it.
        func occupy(_ n: Int, of pool: ReadPool) async -> [Task<Void, any Error>] {
            let tasks = (0..<n).map { _ in
                Task { try await pool.run { self.started.add(1, ordering: .relaxed); self.gate.wait() } }
            }
            await ReadPoolTests.until { self.started.load(ordering: .relaxed) == n }
            return tasks
        }

        func release(_ n: Int) { for _ in 0..<n { gate.signal() } }
    }

    /// Waits (without a deadline assertion: the suite's own timeout bounds it) until `condition`.
    static func until(_ condition: () -> Bool) async {
        while !condition() { try? await Task.sleep(for: .milliseconds(5)) }
    }

    static func makeNode(threads: Int, maxQueued: Int) throws -> EmberNode {
        try OperationsTests.makeNode { config in
            config.readPool.threads = threads
            config.readPool.maxQueued = maxQueued
        }.0
    }

    static func rest(_ node: EmberNode, _ method: HTTPRequest.Method, _ path: String, body: String? = nil,
                     accept: String? = nil) async -> (status: Int, text: String) {
        var fields = HTTPFields()
        if let accept { fields[.accept] = accept }
        let head = HTTPRequest(method: method, scheme: "http", authority: "localhost", path: path, headerFields: fields)
        let request = Request(head: head, body: RequestBody(buffer: ByteBuffer(string: body ?? "")))
        let response = await node.admin.respond(to: request, channel: nil)
        let sink = Collected()
        if accept == nil { try? await response.body.write(CollectingWriter(sink: sink)) }
        return (response.status.code, sink.text)
    }

    final class Collected: @unchecked Sendable {
        var bytes = ByteBuffer()
        var text: String { String(buffer: bytes) }
    }

    struct CollectingWriter: ResponseBodyWriter {
        let sink: Collected
        mutating func write(_ buffer: ByteBuffer) async throws {
            var b = buffer
            sink.bytes.writeBuffer(&b)
        }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }

    @Test func aFullReadPoolRefusesReadsButWritesGoOnAndQueuedReadsAreAnswered() async throws {
        let node = try Self.makeNode(threads: 2, maxQueued: 1)
        defer { node.ports.close() }
        #expect(await Self.rest(node, .put, "/a.json?ns=ns", body: #"{"x":1}"#).status == 200)
        // Both read threads blocked (as by two long reads), then one real GET waits in the queue.
        let hold = Hold()
        let holders = await hold.occupy(2, of: node.reads)
        let queued = Task { await Self.rest(node, .get, "/a.json?ns=ns") }
        await Self.until { node.reads.inFlight == 3 }

        // Past the queue bound: REST 503 with an error body, nothing waits.
        let refused = await Self.rest(node, .get, "/a.json?ns=ns")
        #expect(refused.status == 503)
        let error = try JSON.parse(refused.text).objectValue?["error"]?.stringValue
        #expect(error == node.reads.refusal)
        // An SSE stream whose first read is refused holds no stream slot.
        #expect(await Self.rest(node, .get, "/a.json?ns=ns", accept: "text/event-stream").status == 503)
        #expect(node.hub.count == 0)
        // Wire get and listen: status `unavailable`, and the listen is not left half-open.
        let session = node.realtime.open(id: UUID().uuidString, namespace: "ns")!
        let wire = RealtimeHandler(session: session, store: node.ports, config: node.config, policy: node.policy,
                                   reads: node.reads, pipeline: WirePipeline(writer: node.ports.writer, session: session))
        await wire.handle(wireRequest(1, "g", #"{"p":"a","q":{}}"#))
        await wire.handle(wireRequest(2, "q", #"{"p":"a","h":""}"#))
        let refusals = await drain(session, 2).compactMap(wireResponse)
        #expect(refusals.map(\.r) == [1, 2])
        #expect(refusals.map(\.status) == ["unavailable", "unavailable"])
        #expect(refusals.first?.data == .string(node.reads.refusal))

        // Writes do not wait for reads: REST and wire writes are answered while every read
        // thread is held and the queued GET cannot have been served.
        #expect(await Self.rest(node, .put, "/a/x.json?ns=ns", body: "2").status == 200)
        await wire.handle(wireRequest(3, "p", #"{"p":"a/y","d":3}"#))
        let ack = await drain(session, 1).compactMap(wireResponse).first
        #expect(ack?.r == 3 && ack?.status == "ok")
        #expect(node.reads.inFlight == 3)

        hold.release(2)
        for h in holders { try await h.value }
        // The queued GET is answered after the release, and sees the writes made meanwhile.
        let served = await queued.value
        #expect(served.status == 200)
        #expect(try JSON.parse(served.text) == .object(["x": .int(2), "y": .int(3)]))
        // The refused listen can be made again: initial data, then ok.
        await wire.handle(wireRequest(4, "q", #"{"p":"a","h":""}"#))
        let listen = await drain(session, 2)
        #expect(listen[0].objectValue?["d"]?.objectValue?["b"]?.objectValue?["d"] == .object(["x": .int(2), "y": .int(3)]))
        let ok = wireResponse(listen[1])
        #expect(ok?.r == 4 && ok?.status == "ok")
        #expect(node.reads.inFlight == 0)
        await node.reads.shutdown()
    }

    @Test func largeReadsBeyondTheThreadsAreServedWhileWritesAndSmallReadsGoOn() async throws {
        let node = try Self.makeNode(threads: 2, maxQueued: 64)
        defer { node.ports.close() }
        // ~1 MB under /big: each GET reads and serializes all of it on a read thread.
        let leaf = String(repeating: "v", count: 250)
        let big = "{" + (0..<4_000).map { #""k\#($0)":"\#(leaf)""# }.joined(separator: ",") + "}"
        #expect(await Self.rest(node, .put, "/big.json?ns=ns", body: big).status == 200)
        let results = await withTaskGroup(of: (String, Int, String).self) { group in
            for i in 0..<6 { group.addTask { let r = await Self.rest(node, .get, "/big.json?ns=ns"); return ("big\(i)", r.status, r.text) } }
            for i in 0..<10 {
                group.addTask { let r = await Self.rest(node, .put, "/small/w\(i).json?ns=ns", body: "\(i)"); return ("put\(i)", r.status, r.text) }
                group.addTask { let r = await Self.rest(node, .get, "/big/k\(i).json?ns=ns"); return ("get\(i)", r.status, r.text) }
            }
            var all: [(String, Int, String)] = []
            for await r in group { all.append(r) }
            return all
        }
        #expect(results.count == 26)
        for (name, status, text) in results {
            #expect(status == 200, "\(name)")
            if name.hasPrefix("big") { #expect(try JSON.parse(text).objectValue?.count == 4_000, "\(name)") }
            if name.hasPrefix("get") { #expect(text == #""\#(leaf)""#, "\(name)") }
        }
        #expect(try node.ports.reader.read(namespace: "ns", path: Path("small")).node.children.count == 10)
        await node.reads.shutdown()
    }

    @Test func aStoppedPoolRefusesReads() async throws {
        var limits = ReadPool.Limits()
        limits.threads = 1
        limits.maxQueued = 0
        let pool = ReadPool(limits: limits)
        #expect(try await pool.run { 41 + 1 } == 42)
        await pool.shutdown()
        await #expect(throws: StoreUnavailable.self) { try await pool.run { 1 } }
        #expect(pool.inFlight == 0)
    }
}
