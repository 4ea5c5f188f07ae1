/// The event loop's pending timers, earliest deadline first: what is due, and when the loop's
/// timerfd must be set to wake.
///
/// Deadlines are kept in a binary min-heap, so scheduling and taking the earliest cost
/// O(log n) however many timers are pending (every connection whose output is blocked holds a
/// stall timer, and a thousand followers block and drain many times a second). A cancelled
/// timer's place stays in the heap until it surfaces and is skipped then (tokens are never
/// reused); the heap is rebuilt without such places once they outnumber the live timers, so
/// timers set and cancelled again and again do not pile up until their deadlines.
///
/// The timerfd is set again only when a timer is due before it would wake: a cancelled timer
/// may still wake it once for nothing, and the loop then sets it to the earliest live one.
struct TimerQueue<Action> {
    private struct Place: Comparable {
        let deadline: ContinuousClock.Instant
        /// Orders timers with the same deadline by when they were scheduled.
        let token: UInt64

        static func < (a: Place, b: Place) -> Bool { (a.deadline, a.token) < (b.deadline, b.token) }
    }

    private var actions: [UInt64: Action] = [:]
    private var heap = MinHeap<Place>()
    /// What the timerfd is set to wake at; nil once it fired (or never was set).
    private var wakeUp: ContinuousClock.Instant?

    /// Timers scheduled and neither fired nor cancelled.
    var count: Int { actions.count }
    /// Places in the heap, live or cancelled: what the queue's memory grows with.
    var placesHeld: Int { heap.count }

    /// The deadline of the earliest live timer, nil when there is none.
    var earliestDeadline: ContinuousClock.Instant? {
        mutating get {
            dropCancelledFirst()
            return heap.first?.deadline
        }
    }

    /// Adds a timer; `token` must be new. Returns the deadline to set the timerfd to, or nil when
    /// it already wakes in time.
    mutating func schedule(_ token: UInt64, at deadline: ContinuousClock.Instant, _ action: Action) -> ContinuousClock.Instant? {
        actions[token] = action
        heap.push(Place(deadline: deadline, token: token))
        return rearm()
    }

    /// The deadline to set the timerfd to, or nil when it already wakes in time (or no timer is
    /// left); the queue takes it as set.
    mutating func rearm() -> ContinuousClock.Instant? {
        guard let earliest = earliestDeadline else { return nil }
        if let wakeUp, wakeUp <= earliest { return nil }
        wakeUp = earliest
        return earliest
    }

    /// Forgets a timer; one that fired or was cancelled already is left alone.
    mutating func cancel(_ token: UInt64) {
        guard actions.removeValue(forKey: token) != nil else { return }
        if heap.count > 64, heap.count > 2 * actions.count { rebuild() }
    }

    /// The timerfd fired: takes out the timers due at `now`, earliest first (those with one
    /// deadline in the order they were scheduled). Call ``rearm()`` after running them.
    mutating func takeDue(at now: ContinuousClock.Instant) -> [Action] {
        wakeUp = nil
        var due: [Action] = []
        while let first = heap.first, first.deadline <= now {
            heap.popFirst()
            if let action = actions.removeValue(forKey: first.token) { due.append(action) }
        }
        return due
    }

    private mutating func dropCancelledFirst() {
        while let first = heap.first, actions[first.token] == nil { heap.popFirst() }
    }

    private mutating func rebuild() {
        heap.removeAll { actions[$0.token] == nil }
    }
}
