import EmberCore
import Foundation
import Logging
import Synchronization
import Testing

@testable import EmberServer

/// The hand-off from the storage writer to the listeners: everything runs on the feed's thread in
/// the order it was queued, the writer waits only when the bound is reached, and a write's
/// acknowledgement still follows its change on every connection.
@Suite struct ChangeFeedTests {
    /// A value shared with the feed's thread.
    final class Shared<T: Sendable>: Sendable {
        let m: Mutex<T>
        init(_ v: T) { m = Mutex(v) }
        var value: T { m.withLock { $0 } }
        func update(_ f: (inout T) -> Void) { m.withLock { f(&$0) } }
    }

    func change(_ i: Int) -> CommittedChange {
        CommittedChange(index: UInt64(i), namespace: "ns", path: try! Path("k"), kind: .set(Node(.int(Int64(i)))))
    }

    /// A started feed whose thread holds change 1 (`holding` says so) until `gate` is signalled;
    /// `seen` records the indexes it delivered.
    func heldFeed(maxQueued: Int) -> (ChangeFeed, DispatchSemaphore, Shared<[UInt64]>, Shared<Bool>) {
        let feed = ChangeFeed(maxQueued: maxQueued)
        let gate = DispatchSemaphore(value: 0)
        let seen = Shared<[UInt64]>([])
        let holding = Shared(false)
        feed.start { c in
            if c.index == 1 {
                holding.update { $0 = true }
                gate.wait()
            }
            seen.update { $0.append(c.index) }
        }
        return (feed, gate, seen, holding)
    }

    @Test func changesAndWorkRunInQueueOrderOnTheFeedThread() async {
        let feed = ChangeFeed()
        let seen = Shared<[String]>([])
        let onFeed = Shared(true)
        feed.start { c in
            if !feed.isFeedThread { onFeed.update { $0 = false } }
            seen.update { $0.append("c\(c.index)") }
        }
        var want: [String] = []
        for i in 1...500 {
            feed.publish(change(i))
            want.append("c\(i)")
            if i % 50 == 0 {
                feed.enqueue { seen.update { $0.append("w\(i)") } }
                want.append("w\(i)")
            }
        }
        await feed.barrier()
        #expect(seen.value == want)
        #expect(onFeed.value)
        #expect(feed.backlog == 0)
        // sync from the feed's own thread runs at once instead of waiting for itself.
        let nested = Shared(false)
        feed.sync { feed.sync { nested.update { $0 = true } } }
        #expect(nested.value)
        feed.stop()
        // Stopped: work runs on the caller, changes go nowhere.
        let after = Shared(false)
        feed.enqueue { after.update { $0 = true } }
        #expect(after.value)
    }

    @Test func theWriterWaitsOnlyWhenTheBoundIsReached() async throws {
        let (feed, gate, seen, holding) = heldFeed(maxQueued: 4)
        let published = Shared(0)
        let changes = (1...20).map(change)
        feed.publish(changes[0])
        published.update { $0 += 1 }
        // The feed has taken change 1 and holds it; then a producer fills the queue.
        while !holding.value { try await Task.sleep(for: .milliseconds(1)) }
        let producer = Thread {
            for c in changes.dropFirst() {
                feed.publish(c)
                published.update { $0 += 1 }
            }
        }
        producer.start()
        // Four more fill the queue and the producer waits (or, were the bound not kept, runs
        // through all 20).
        while feed.waitingProducers == 0 && published.value < 20 { try await Task.sleep(for: .milliseconds(1)) }
        #expect(feed.waitingProducers == 1)
        #expect(feed.backlog == 4)
        #expect(published.value == 5, "the producer waits while the queue is full")
        gate.signal()
        while published.value < 20 { try await Task.sleep(for: .milliseconds(1)) }
        await feed.barrier()
        #expect(seen.value == (1...20).map { UInt64($0) })
        feed.stop()
    }

    /// A commit's changes go in as one item: delivered in order with singles and work around
    /// them, and counted change by change against the bound (`backlog`).
    @Test func aCommitsChangesArePublishedAtOnceAndCountedOneByOne() async throws {
        let (feed, gate, seen, holding) = heldFeed(maxQueued: 5)
        feed.publish(change(1))
        while !holding.value { try await Task.sleep(for: .milliseconds(1)) }
        feed.publish((2...4).map(change))
        feed.publish([])
        let ran = Shared(false)
        feed.enqueue { ran.update { $0 = true } }
        #expect(feed.backlog == 4, "three changes and one work item")
        let published = Shared(false)
        let producer = Thread {
            // 4 queued < 5: this commit goes in whole (the bound may be passed by one commit)...
            feed.publish((5...7).map(change))
            // ...and this one waits until the feed takes what is queued.
            feed.publish(change(8))
            published.update { $0 = true }
        }
        producer.start()
        while feed.waitingProducers == 0 && !published.value { try await Task.sleep(for: .milliseconds(1)) }
        #expect(feed.waitingProducers == 1)
        #expect(!published.value, "the producer waits once the bound is reached")
        #expect(feed.backlog == 7)
        gate.signal()
        while !published.value { try await Task.sleep(for: .milliseconds(1)) }
        await feed.barrier()
        #expect(seen.value == (1...8).map { UInt64($0) })
        #expect(ran.value)
        #expect(feed.backlog == 0)
        feed.stop()
    }

    /// The awaited write path (a cluster, a priority write): the response waits for the feed, so
    /// a listener on the same connection has the change before the writer has its answer.
    @Test func anAwaitedWriteIsAnsweredAfterItsPush() async throws {
        let (node, _) = try OperationsTests.makeNode()
        let session = try #require(node.realtime.open(id: UUID().uuidString, namespace: "ns"))
        let handler = RealtimeHandler(session: session, store: node.ports, config: node.config, policy: node.policy,
                                      reads: node.reads)
        await handler.handle(wireRequest(1, "q", #"{"p":"/room","h":""}"#))
        for r in 2...11 { await handler.handle(wireRequest(r, "p", #"{"p":"room/x","d":\#(r)}"#)) }
        let messages = await drain(session, 2 + 20)
        for (i, m) in messages.enumerated().dropFirst(2) {
            if i % 2 == 0 {
                #expect(wireResponse(m) == nil, "a push first")
                #expect(m.objectValue?["d"]?.objectValue?["b"]?.objectValue?["d"] == .int(Int64(i / 2 + 1)))
            } else {
                #expect(wireResponse(m)?.r == Int64(i / 2 + 1))
            }
        }
    }
}
