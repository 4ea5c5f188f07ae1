import FeedKit
import Testing

@testable import FeedEngine

/// ``UpstreamMachine`` alone: no adapter, no clock but instants the test makes, no tasks that run.
@Suite struct UpstreamMachineTests {
    let start = ContinuousClock.now
    let timeout = Duration.seconds(1)
    let step = GenerationPaging.Step(page: 3, request: PageRequest(page: 3, token: "t", generation: 1, seed: "s"), jumped: false)

    func machine(failures: Int = 0) -> UpstreamMachine {
        var retry = RetryPolicy(maximumDelay: .seconds(8))
        retry.jitter = { 1 }
        return UpstreamMachine(retryPolicy: retry)
    }

    /// Begins a fetch whose deadline is `timeout` from `start`; returns its id.
    func begin(_ machine: inout UpstreamMachine, _ work: UpstreamMachine.Work? = nil) -> Int {
        let id = machine.nextID()
        machine.begin(UpstreamMachine.Call(id: id, work: work ?? .fetch(step, maxPages: 1), task: Task {}, deadline: start + timeout))
        return id
    }

    @Test func only_the_call_in_flight_has_its_answer_used() {
        var machine = machine()
        let first = begin(&machine)
        #expect(!machine.isIdle && machine.hasCallInFlight && machine.call?.id == first)
        guard case .stale = machine.returned(first + 100, now: start) else {
            Issue.record("a stranger's answer was used")
            return
        }
        guard case .answer(let call) = machine.returned(first, now: start) else {
            Issue.record("the answer was not used")
            return
        }
        #expect(call.work == .fetch(step, maxPages: 1))
        #expect(machine.isIdle)
        guard case .stale = machine.returned(first, now: start) else {
            Issue.record("an answer was used twice")
            return
        }
    }

    @Test func a_fetch_past_its_deadline_fails_and_is_drained_before_anything_else() {
        var machine = machine()
        let id = begin(&machine)
        #expect(machine.deadlinePassed(now: start + .milliseconds(999), timeout: timeout).timedOut == nil, "not yet")
        let (timedOut, action) = machine.deadlinePassed(now: start + timeout, timeout: timeout)
        #expect(timedOut?.0.id == id && timedOut?.2 == .milliseconds(250) && action == .none)
        #expect(timedOut?.1.message == "page 3: no answer within 1000 ms")
        #expect(machine.hasCallInFlight && !machine.isIdle, "draining: the adapter is not asked again")
        #expect(machine.deadline == start + timeout + timeout, "replaced if it has not returned one timeout later")
        // It returns within that: the backoff starts from its failure.
        guard case .drained(.startTimer(_, let until)) = machine.returned(id, now: start + .milliseconds(1_100)) else {
            Issue.record("a drained call's return should back off")
            return
        }
        #expect(until == start + timeout + .milliseconds(250))
    }

    @Test func a_drained_call_that_never_returns_has_its_adapter_replaced() {
        var machine = machine()
        let id = begin(&machine)
        _ = machine.abandon(now: start, timeout: timeout)
        #expect(machine.deadlinePassed(now: start + timeout, timeout: timeout).action == .replaceAdapter)
        #expect(machine.adapterReplaced(now: start + timeout) == .lookForWork, "abandoned without a failure: no backoff")
        #expect(machine.isIdle)
        guard case .stale = machine.returned(id, now: start + timeout) else {
            Issue.record("the hung call's late answer was used")
            return
        }
    }

    @Test func a_hung_call_without_a_replacement_is_waited_for_without_a_deadline() {
        var machine = machine()
        _ = begin(&machine)
        _ = machine.abandon(now: start, timeout: timeout)
        machine.waitForHungCall()
        #expect(machine.deadline == nil && machine.hasCallInFlight)
    }

    @Test func backoff_grows_with_failures_in_a_row_and_resets_on_recovery() {
        var machine = machine()
        var delays: [Duration] = []
        for _ in 0..<4 {
            let id = begin(&machine)
            _ = machine.returned(id, now: start)
            let (delay, action) = machine.backOff(after: .transient("boom"), now: start)
            delays.append(delay)
            guard case .startTimer(let timer, _) = action else {
            Issue.record("no timer for the backoff")
            return
        }
            #expect(machine.timerFired(timer + 1) == .none, "another timer's end changes nothing")
            #expect(machine.timerFired(timer) == .lookForWork)
        }
        #expect(delays == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2)])
        machine.recovered()
        #expect(machine.consecutiveFailures == 0)
    }

    @Test func waiting_for_the_fleet_ends_with_the_page_or_the_timer() {
        var machine = machine()
        guard case .startTimer(let timer, let until) = machine.awaitFleet(page: 3, until: start + .seconds(1)) else {
            Issue.record("no timer for the wait")
            return
        }
        #expect(until == start + .seconds(1) && !machine.isIdle && !machine.hasCallInFlight)
        #expect(machine.fleetPageArrived(4) == .none, "another page does not end the wait")
        #expect(machine.fleetPageArrived(3) == .lookForWork)
        #expect(machine.timerFired(timer) == .none, "the wait is over already")
        _ = machine.awaitFleet(page: 5, until: start + .seconds(1))
        #expect(machine.timerFired(timer + 1) == .lookForWork)
    }

    @Test func abandoning_from_every_state_leaves_nothing_to_wait_for_but_a_running_call() {
        var machine = machine()
        _ = machine.abandon(now: start, timeout: timeout)
        #expect(machine.isIdle)
        _ = machine.backOff(after: .transient("x"), now: start)
        _ = machine.abandon(now: start, timeout: timeout)
        #expect(machine.isIdle, "a pending retry is dropped")
        _ = machine.awaitFleet(page: 1, until: start + timeout)
        _ = machine.abandon(now: start, timeout: timeout)
        #expect(machine.isIdle)
        let id = begin(&machine, .waitForNewData(step))
        _ = machine.abandon(now: start, timeout: timeout)
        #expect(machine.hasCallInFlight && !machine.isIdle, "a running call is drained")
        guard case .drained(.lookForWork) = machine.returned(id, now: start) else {
            Issue.record("drained without looking for work")
            return
        }
        #expect(machine.stop() == nil && machine.isStopped)
    }
}
