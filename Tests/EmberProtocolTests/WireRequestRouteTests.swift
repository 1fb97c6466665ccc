import EmberCore
import EmberTestSupport
import Testing

@testable import EmberProtocol

/// The order of a connection's requests around its pipelined writes, and its own request budget.
@Suite struct WireRequestRouteTests {
    func request(_ r: Int64, _ action: String, _ body: String = #"{"p":"a"}"#) -> Result<WireClientMessage, WireClientMessage.ParseError> {
        WireClientMessage.parse(#"{"t":"d","d":{"r":\#(r),"a":"\#(action)","b":\#(body)}}"#)
    }

    func describe(_ route: WireRequestRoute) -> String {
        let r = route.request.map { "r\($0) " } ?? ""
        switch route.handling {
        case .now: return r + "now"
        case .pipelined(let action, _): return r + "pipelined " + action
        case .afterWrites: return r + "afterWrites"
        }
    }

    @Test func writesArePipelinedAndEveryOtherRequestWaitsForThem() {
        let routes = [request(1, "p"), request(2, "m"), request(3, "g"), request(4, "q"), request(5, "o"), request(6, "auth", #"{"cred":"x"}"#),
                      request(7, "n"), request(8, "s")].map { describe(WireRequestRoute($0, pipelined: true)) }
        #expect(routes == ["r1 pipelined p", "r2 pipelined m", "r3 afterWrites", "r4 afterWrites", "r5 afterWrites", "r6 afterWrites",
                           "r7 afterWrites", "r8 afterWrites"])
    }

    @Test func withoutAPipelineEveryRequestIsHandledInTurn() {
        for action in ["p", "m", "g", "q"] {
            #expect(describe(WireRequestRoute(request(9, action), pipelined: false)) == "r9 now")
        }
    }

    @Test func messagesThatAreNotRequestsWaitForNothingAndSpendNoBudget() {
        for text in [#"{"t":"c","d":{"t":"p","d":{}}}"#, "not json", #"{"t":"d","d":{"b":{}}}"#] {
            let route = WireRequestRoute(WireClientMessage.parse(text), pipelined: true)
            #expect(route.request == nil)
            #expect(describe(route) == "now")
        }
    }

    @Test func theBudgetRefusesPastTheBurstAndRefillsWithTime() {
        var rate = RequestRateLimit()
        rate.perSecond = 10
        rate.burst = 3
        var budget = WireRequestBudget(rate: rate)
        let first = (0..<4).map { _ in budget.admit(now: 1_000) }
        #expect(first == [true, true, true, false])
        #expect(budget.refusal == "Too many requests (limit 10 per second)")
        // 100 ms later one request's worth has accrued.
        #expect(budget.admit(now: 1_100) == true)
        #expect(budget.admit(now: 1_100) == false)
    }

    @Test func aZeroRateTurnsTheBudgetOff() {
        var rate = RequestRateLimit()
        rate.perSecond = 0
        var budget = WireRequestBudget(rate: rate)
        #expect((0..<10_000).allSatisfy { _ in budget.admit(now: 0) })
    }
}
