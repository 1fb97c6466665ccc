import EmberCore
import EmberProtocol
import HTTPTypes
import NIOCore

/// The writes one connection's fast path took (`RestFastPath` on HTTP parts, `RawRestFastPath`
/// on bytes), kept in request order until each is answered. A write is judged with the same code
/// as the Hummingbird path (`RestHandler.prepareWrite`, the `ClientPolicy`'s identity and rate limits,
/// `RestAnswer`), so both fronts answer alike byte for byte. Event loop only.
struct FastWriteQueue {
    /// What a write is answered with; each front renders it (HTTPTypes parts, or bytes).
    enum Reply {
        /// `print=silent`: 204 with no body.
        case silent
        case json(JSON, pretty: Bool, status: HTTPResponse.Status)
        case error(any Error)

        var answer: RestAnswer {
            switch self {
            case .silent: RestAnswer.noContent()
            case .json(let value, let pretty, let status): RestAnswer.json(value, pretty: pretty, status: status)
            case .error(let e): RestAnswer.error(e)
            }
        }
    }

    struct Answer {
        let tag: UInt64
        var echo: WriteEcho = .null
        let print: RestRequest.Print
        var reply: Reply?
    }

    private var answers = CircularBuffer<Answer>()
    private var nextTag: UInt64 = 0
    private var writer: (any PipelinedWriter)?

    var isEmpty: Bool { answers.isEmpty }
    /// Writes taken and not yet handed out as answers.
    var count: Int { answers.count }

    /// Judges the write as the Hummingbird path does and queues it; a refusal is answered in turn
    /// (`nextAnswered` hands it out once every write before it is answered).
    mutating func take(_ req: RestRequest, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer,
                       rest: RestHandler, channel: any Channel, sink: any WriteOutcomeSink) {
        let tag = nextTag
        nextTag += 1
        var answer = Answer(tag: tag, print: req.print)
        do {
            guard rest.policy.admitREST(channel, now: rest.clock()) else { throw RestError(429, "Too many requests") }
            let ns = req.namespace ?? rest.config.defaultNamespace
            let identity = try rest.policy.restIdentity(req, headers: headers, channel: channel)
            let json = try RestHandler.body(body.readableBytesView, method: method)
            let (request, echo) = try rest.prepareWrite(namespace: ns, path: req.path, method: method, json: json,
                                                        condition: nil, identity: identity)
            answer.echo = echo
            answers.append(answer)
            if writer == nil { writer = rest.store.writer.pipelinedWriter(sink: sink) }
            guard let writer else {
                // A store without pipelined writes (none today): answer as unavailable, in turn.
                fill(tag, .failure(StoreUnavailable("The store takes no pipelined writes")))
                return
            }
            for refused in writer.enqueue([(tag, request)]) { fill(refused.tag, .failure(refused.error)) }
        } catch {
            answer.reply = .error(error)
            answers.append(answer)
        }
    }

    /// Records a write's outcome (from the store, on the loop); outcomes of writes no longer
    /// queued (the connection went away) are dropped.
    mutating func fill(_ tag: UInt64, _ outcome: Result<EmberNodeStore.WriteOutcome, any Error>) {
        guard let first = answers.first?.tag, tag >= first else { return }
        let i = answers.index(answers.startIndex, offsetBy: Int(tag - first))
        guard i < answers.endIndex else { return }
        assert(answers[i].tag == tag, "answers are kept in tag order")
        switch outcome {
        case .success(let o) where o.applied:
            answers[i].reply = answers[i].print == .silent
                ? .silent
                : .json(answers[i].echo.answer(o), pretty: answers[i].print == .pretty, status: .ok)
        case .success(let o):
            // No condition is ever sent from a fast path; kept for parity with the Hummingbird path.
            answers[i].reply = .json(o.value.toJSON(), pretty: false, status: .preconditionFailed)
        case .failure(let e):
            answers[i].reply = .error(e)
        }
    }

    /// The oldest write's answer once it is answered (in request order), removed from the queue.
    mutating func nextAnswered() -> Reply? {
        guard let reply = answers.first?.reply else { return nil }
        answers.removeFirst()
        return reply
    }

    /// The connection went away: forget the writes (they are committed whatever happens) and let
    /// go of the writer, which holds the sink.
    mutating func reset() {
        answers.removeAll()
        writer = nil
    }
}
