import EmberCore
import EmberProtocol
import HTTPTypes
import NIOCore
import Testing

@testable import EmberServer

/// The byte-level reader of `RawRestFastPath`: it must take exactly the plain writes and leave
/// every other request (and every head it does not fully understand) to the full HTTP stack.
@Suite struct RawWriteHeadTests {
    func parse(_ text: String) -> RawWriteHead.Parse { RawWriteHead.parse(Array(text.utf8)) }

    func write(_ text: String) -> RawWriteHead? {
        if case .write(let head) = parse(text) { return head }
        return nil
    }

    func isOther(_ text: String) -> Bool {
        if case .other = parse(text) { return true }
        return false
    }

    func isIncomplete(_ text: String) -> Bool {
        if case .incomplete = parse(text) { return true }
        return false
    }

    @Test func takesPlainWrites() throws {
        let put = try #require(write("PUT /a/b.json?print=silent HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{\"x\":1}"))
        #expect(put.method == .put)
        #expect(try put.request.target == .data(Path("a/b")))
        #expect(put.request.print == .silent)
        #expect(put.contentLength == 7)
        #expect(put.headLength == "PUT /a/b.json?print=silent HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n".utf8.count)
        #expect(put.authorization == nil)

        let patch = try #require(write("PATCH /a.json?ns=n1 HTTP/1.1\r\ncontent-LENGTH:   3 \r\nConnection: Keep-Alive\r\nAuthorization: Bearer owner\r\n\r\n"))
        #expect(patch.method == .patch && patch.contentLength == 3)
        #expect(patch.request.namespace == "n1")
        #expect(patch.authorization == "Bearer owner")

        #expect(write("POST /list.json HTTP/1.1\r\nContent-Length: 1\r\n\r\n")?.method == .post)
        // No headers at all, no body: a DELETE.
        let delete = try #require(write("DELETE /a/d.json HTTP/1.1\r\n\r\n"))
        #expect(delete.method == .delete && delete.contentLength == 0)
    }

    @Test func waitsForTheWholeHead() {
        #expect(isIncomplete(""))
        #expect(isIncomplete("PUT /a.json HTTP/1.1\r\nContent-Length: 1\r\n"))
        #expect(isIncomplete("PUT /a.json HTTP/1.1\r\nContent-Length: 1\r\n\r"))
        // A head longer than the limit without its end: the full stack's (which answers 414).
        #expect(isOther("PUT /a.json HTTP/1.1\r\nX-Long: " + String(repeating: "a", count: RawWriteHead.maxHeadBytes)))
    }

    @Test func leavesEverythingElseToTheFullStack() {
        let others = [
            "GET /a.json HTTP/1.1\r\n\r\n",
            "OPTIONS /a.json HTTP/1.1\r\n\r\n",
            "put /a.json HTTP/1.1\r\n\r\n",  // methods are case-sensitive
            "PUT /a.json HTTP/1.0\r\nContent-Length: 1\r\n\r\n",
            "PUT a.json HTTP/1.1\r\n\r\n",
            "PUT  /a.json HTTP/1.1\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nIf-Match: abc\r\nContent-Length: 1\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nX-Firebase-ETag: true\r\nContent-Length: 1\r\n\r\n",
            "POST /a.json HTTP/1.1\r\nX-HTTP-Method-Override: PUT\r\nContent-Length: 1\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nContent-Length: \r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nContent-Length: 1234567\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nContent-Length: \(RawWriteHead.maxBodyBytes + 1)\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nContent-Length : 1\r\n\r\n",  // space before the colon
            "PUT /a.json HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",  // obsolete line folding
            "PUT /a.json HTTP/1.1\r\nNoColon\r\n\r\n",
            "PUT /a.json HTTP/1.1\nContent-Length: 1\r\n\r\n",  // a bare LF
            "PUT /a.json HTTP/1.1\r\nX: a\u{01}b\r\n\r\n",  // a control character in a value
            "PUT /a/.b.json HTTP/1.1\r\n\r\n",  // an invalid path: Hummingbird answers it
            "PUT /a.json?shallow=true HTTP/1.1\r\n\r\n",
            "PUT /a.json?orderBy=%22%24key%22 HTTP/1.1\r\n\r\n",
            "PUT /a.json?format=export HTTP/1.1\r\n\r\n",
            "POST /a.json?x-http-method-override=PUT HTTP/1.1\r\n\r\n",
            "PUT /a/.priority.json HTTP/1.1\r\n\r\n",
            "PUT /.settings/rules.json HTTP/1.1\r\n\r\n",
            "PUT /a.json HTTP/1.1\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n",
        ]
        for text in others { #expect(isOther(text), "\(text.debugDescription)") }
    }

    @Test func encodesAnswersAsNIOWouldSendThem() {
        var out = ByteBuffer()
        RawAnswers.encode(RestAnswer(status: .ok, headers: [.contentType: "application/json"], body: ByteBuffer(string: "1")).parts, into: &out)
        let text = String(buffer: out)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1\r\nDate: "))
        #expect(text.hasSuffix("\r\nServer: Ember\r\n\r\n1"))

        // A status made from a bare code still gets its standard reason phrase.
        out.clear()
        RawAnswers.encode(RestAnswer.error(RestError(429, "Too many requests")).parts, into: &out)
        let refused = String(buffer: out)
        #expect(refused.hasPrefix("HTTP/1.1 429 Too Many Requests\r\n"))
        #expect(refused.hasSuffix("\r\n\r\n{\n  \"error\" : \"Too many requests\"\n}\n"))

        out.clear()
        RawAnswers.encode(RestAnswer.noContent().parts, into: &out)
        #expect(String(buffer: out).hasPrefix("HTTP/1.1 204 No Content\r\nAccess-Control-Allow-Origin: *\r\n"))
        #expect(String(buffer: out).hasSuffix("Server: Ember\r\n\r\n"))
    }

    /// Every prefix of a valid pipelined stream and many seeded mutations of it: the reader never
    /// reads outside the bytes (this suite runs with bounds checks) and what it takes is well formed.
    @Test func survivesMutatedAndCutInput() {
        let valid = Array(("PUT /a/b.json?print=silent HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n"
            + "Content-Length: 7\r\n\r\n{\"x\":1}PATCH /c.json HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}").utf8)
        func check(_ bytes: [UInt8]) {
            let parsed = RawWriteHead.parse(bytes)
            guard case .write(let head) = parsed else { return }
            #expect(head.headLength <= bytes.count && head.headLength >= 4)
            #expect(Array(bytes[(head.headLength - 4)..<head.headLength]) == Array("\r\n\r\n".utf8))
            #expect(head.contentLength <= RawWriteHead.maxBodyBytes)
        }
        for n in 0...valid.count { check(Array(valid.prefix(n))) }
        var seed: UInt64 = 0x5EED_1234
        func next() -> Int {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return Int(truncatingIfNeeded: seed >> 33)
        }
        let alphabet = Array(" :\r\n\t/?=.0123456789aZ\u{7F}".utf8) + [0, 0x80, 0xFF]
        for _ in 0..<20_000 {
            var bytes = valid
            for _ in 0...(next() % 4) {
                let at = next() % bytes.count
                switch next() % 3 {
                case 0: bytes[at] = alphabet[next() % alphabet.count]
                case 1: bytes.remove(at: at)
                default: bytes.insert(alphabet[next() % alphabet.count], at: at)
                }
            }
            check(Array(bytes.prefix(next() % (bytes.count + 1))))
            check(bytes)
        }
    }

    /// The byte templates answer exactly as the HTTPTypes rendering encoded would.
    @Test func templatedAnswersEqualTheRenderedOnes() throws {
        let replies: [FastWriteQueue.Reply] = [
            .silent,
            .json(.null, pretty: false, status: .ok),
            .json(try JSON.parse(#"{"name":"-N1","é":[1,2.5,"x"]}"#), pretty: false, status: .ok),
            .json(try JSON.parse(#"{"a":{"b":true}}"#), pretty: true, status: .ok),
            .json(try JSON.parse("3"), pretty: false, status: .preconditionFailed),
            .error(RestError(403, "Permission denied")),
        ]
        for reply in replies {
            // Retried if the second (the Date header) turned between the two renderings.
            for attempt in 0..<3 {
                var answers = RawAnswers()
                var templated = ByteBuffer()
                let status = answers.write(reply, into: &templated)
                var rendered = ByteBuffer()
                RawAnswers.encode(reply.answer.parts, into: &rendered)
                if templated != rendered && attempt < 2 { continue }
                #expect(String(buffer: templated) == String(buffer: rendered))
                #expect(status == reply.answer.status.code)
                break
            }
        }
    }
}
