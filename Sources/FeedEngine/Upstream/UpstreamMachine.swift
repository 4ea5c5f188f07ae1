import FeedKit

/// The one thing a feed's upstream is doing, and the rules that keep SPEC §4's promises:
/// - a call starts only from `idle`, so no two calls to an adapter instance overlap; a call that
///   must be abandoned (refresh, reload, timeout, stop) is cancelled and *drained*: nothing else
///   starts until it has returned, or until the instance is replaced one `timeout` later;
/// - an answer is used only while the state still holds the call it answers (``returned(_:now:)``
///   is the one place that says so);
/// - every fetch is bounded by a deadline on the injected clock.
///
/// The feed owns the machine and carries out the ``Action``s its changes return: starting the
/// call's task, sleeping until a timer, replacing the adapter instance. The machine also counts
/// failures in a row, which set the backoff (``RetryPolicy``).
struct UpstreamMachine {
    /// What a call does.
    enum Work: Equatable {
        /// Fetch up to `maxPages` pages from `page` on (see ``PageFetch``).
        case fetch(GenerationPaging.Step, maxPages: Int)
        /// Read page `page` from the state directory, which keeps its items.
        case readStored(GenerationPaging.Step)
        /// A live source had nothing past `page − 1`: wait until it may have more.
        case waitForNewData(GenerationPaging.Step)

        var step: GenerationPaging.Step {
            switch self {
            case .fetch(let step, _), .readStored(let step), .waitForNewData(let step): step
            }
        }
    }

    /// A call in flight.
    struct Call {
        let id: Int
        let work: Work
        let task: Task<Void, Never>
        /// When it is given up (or, drained, when its adapter instance is replaced); nil while
        /// waiting for new data, which the adapter bounds by the poll interval, or for as long as
        /// a hung call without a replacement takes.
        var deadline: ContinuousClock.Instant?
    }

    /// What the owner does after a change.
    enum Action: Equatable {
        case none
        /// Nothing is in progress: choose the next call.
        case lookForWork
        /// Sleep until `until`, then call ``timerFired(_:)`` with `id`.
        case startTimer(id: Int, until: ContinuousClock.Instant)
        /// A drained call never returned: use a fresh adapter instance, then ``adapterReplaced(now:)``.
        case replaceAdapter
    }

    /// What ``returned(_:now:)`` found.
    enum Returned {
        /// The answer of the call in flight: use it. The machine is idle now.
        case answer(Call)
        /// A drained call came back: nothing waits for its answer.
        case drained(Action)
        /// An answer nobody waits for (its adapter instance was replaced, or the feed stopped).
        case stale
    }

    private enum State {
        case idle
        case calling(Call)
        /// Another instance of the fleet holds the page's lease: wait for its publication, and
        /// look again at `until` at the latest. Nothing is asked of the adapter meanwhile.
        case awaitingFleet(page: Int, until: ContinuousClock.Instant, id: Int)
        /// A call the feed no longer wants an answer from, still running: nothing else is asked of
        /// the adapter until it returns. `retryAt`: when the next fetch may start, after a failure.
        case draining(Call, retryAt: ContinuousClock.Instant?)
        /// The last fetch failed; the next one waits for the timer `id`.
        case backingOff(until: ContinuousClock.Instant, id: Int)
        case stopped
    }

    private var state = State.idle {
        didSet {
            if case .calling(let call) = state { callID = call.id } else { callID = nil }
        }
    }
    /// The id of the call whose answer is awaited, if any (kept beside the state, for the planner's
    /// look at every `next`, which would otherwise copy the call out of it).
    private(set) var callID: Int?
    private var lastID = 0
    private(set) var consecutiveFailures = 0
    var retryPolicy: RetryPolicy

    init(retryPolicy: RetryPolicy) {
        self.retryPolicy = retryPolicy
    }

    // MARK: Where it is

    var isIdle: Bool {
        if case .idle = state { true } else { false }
    }

    var isStopped: Bool {
        if case .stopped = state { true } else { false }
    }

    /// Whether an adapter call is running (the adapter may not be swapped meanwhile).
    var hasCallInFlight: Bool {
        switch state {
        case .calling, .draining: true
        case .idle, .awaitingFleet, .backingOff, .stopped: false
        }
    }

    /// The call whose answer is awaited, if any.
    var call: Call? {
        if case .calling(let call) = state { call } else { nil }
    }

    /// The instant the call in flight is to be given up at, if any.
    var deadline: ContinuousClock.Instant? {
        switch state {
        case .calling(let call), .draining(let call, _): call.deadline
        case .idle, .awaitingFleet, .backingOff, .stopped: nil
        }
    }

    /// A fresh id, for a call or a timer; ids are never reused, so a late answer is recognised.
    mutating func nextID() -> Int {
        lastID += 1
        return lastID
    }

    // MARK: Changes

    /// Starts `call`, which must have an id from ``nextID()``; only from idle.
    mutating func begin(_ call: Call) {
        precondition(isIdle, "a call starts only when nothing else is in progress")
        state = .calling(call)
    }

    /// The task of call `id` returned.
    mutating func returned(_ id: Int, now: ContinuousClock.Instant) -> Returned {
        switch state {
        case .calling(let call) where call.id == id:
            state = .idle
            return .answer(call)
        case .draining(let call, let retryAt) where call.id == id:
            return .drained(rest(retryAt: retryAt, now: now))
        default:
            return .stale
        }
    }

    /// A deadline may have passed. A fetch past it is given up and drained, and counts as a
    /// failure: returns the call and the error, which the owner reports, and the action. A
    /// drained call past it has its adapter instance replaced.
    mutating func deadlinePassed(now: ContinuousClock.Instant, timeout: Duration) -> (timedOut: (Call, SourceError, Duration)?, action: Action) {
        switch state {
        case .calling(let call) where call.deadline.map({ $0 <= now }) ?? false:
            call.task.cancel()
            let error = SourceError.transient("page \(call.work.step.page): no answer within \(timeout.wholeMilliseconds) ms")
            let delay = failed(error)
            drain(call, retryAt: now + delay, now: now, timeout: timeout)
            return ((call, error, delay), .none)
        case .draining(let call, _) where call.deadline.map({ $0 <= now }) ?? false:
            return (nil, .replaceAdapter)
        default:
            return (nil, .none)
        }
    }

    /// The adapter instance of a hung call was replaced: the call is forgotten.
    mutating func adapterReplaced(now: ContinuousClock.Instant) -> Action {
        guard case .draining(_, let retryAt) = state else { return .none }
        return rest(retryAt: retryAt, now: now)
    }

    /// A hung call has no replacement: it is waited for for as long as it takes.
    mutating func waitForHungCall() {
        guard case .draining(var call, let retryAt) = state else { return }
        call.deadline = nil
        state = .draining(call, retryAt: retryAt)
    }

    /// Stops using the call in flight, because the feed moved on (refresh, reload, stop): it is
    /// cancelled and drained. A pending retry or wait is dropped: the next call starts afresh.
    mutating func abandon(now: ContinuousClock.Instant, timeout: Duration) -> Action {
        switch state {
        case .calling(let call):
            call.task.cancel()
            drain(call, retryAt: nil, now: now, timeout: timeout)
        case .draining(let call, _):
            drain(call, retryAt: nil, now: now, timeout: timeout)
        case .backingOff, .awaitingFleet:
            state = .idle
        case .idle, .stopped:
            break
        }
        return .none
    }

    /// The answer was a failure: count it and wait `delay` before the next fetch.
    mutating func backOff(after error: SourceError, now: ContinuousClock.Instant) -> (delay: Duration, action: Action) {
        let delay = failed(error)
        guard isIdle else { return (delay, .none) }
        let id = nextID()
        state = .backingOff(until: now + delay, id: id)
        return (delay, .startTimer(id: id, until: now + delay))
    }

    /// Another instance fetches `page`: wait for its publication until `until`.
    mutating func awaitFleet(page: Int, until: ContinuousClock.Instant) -> Action {
        guard isIdle else { return .none }
        let id = nextID()
        state = .awaitingFleet(page: page, until: until, id: id)
        return .startTimer(id: id, until: until)
    }

    /// Page `number` reached the feed from the fleet.
    mutating func fleetPageArrived(_ number: Int) -> Action {
        guard case .awaitingFleet(let page, _, _) = state, page == number else { return .none }
        state = .idle
        return .lookForWork
    }

    /// Timer `id` went off.
    mutating func timerFired(_ id: Int) -> Action {
        switch state {
        case .backingOff(_, let current) where current == id, .awaitingFleet(_, _, let current) where current == id:
            state = .idle
            return .lookForWork
        default:
            return .none
        }
    }

    /// An answer came: the upstream is healthy again.
    mutating func recovered() {
        consecutiveFailures = 0
    }

    /// The feed was closed; returns the call to cancel, if any.
    mutating func stop() -> Call? {
        defer { state = .stopped }
        switch state {
        case .calling(let call), .draining(let call, _): return call
        case .idle, .awaitingFleet, .backingOff, .stopped: return nil
        }
    }

    // MARK: Helpers

    /// Counts a failure and returns how long to wait before trying again.
    private mutating func failed(_ error: SourceError) -> Duration {
        consecutiveFailures = min(consecutiveFailures + 1, 1_000)
        return retryPolicy.delay(after: error, failures: consecutiveFailures)
    }

    /// Waits for `call` to return before anything else is asked of the adapter; if it has not
    /// returned one `timeout` later, its adapter instance is replaced.
    private mutating func drain(_ call: Call, retryAt: ContinuousClock.Instant?, now: ContinuousClock.Instant, timeout: Duration) {
        var drained = call
        drained.deadline = now + timeout
        state = .draining(drained, retryAt: retryAt)
    }

    /// Leaves draining: backing off until `retryAt` if that is still ahead, else idle.
    private mutating func rest(retryAt: ContinuousClock.Instant?, now: ContinuousClock.Instant) -> Action {
        guard let retryAt, retryAt > now else {
            state = .idle
            return .lookForWork
        }
        let id = nextID()
        state = .backingOff(until: retryAt, id: id)
        return .startTimer(id: id, until: retryAt)
    }
}
