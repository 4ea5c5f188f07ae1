import CEventLoop
import Glibc

/// The main thread's loop: one epoll set holding the daemon's sockets and the main dispatch queue.
///
/// The main actor's work arrives on the main dispatch queue, whose wake-up descriptor is in the
/// same set, so a socket's handler runs on the main actor on the very thread that epoll woke: a
/// request is read, answered and written within one wake-up. (Dispatch sources first wake
/// Dispatch's own event thread, which then wakes the main thread; that doubled the wake-ups per
/// request and put the slow tail of replies past a millisecond on a 2-core machine.)
///
/// Interest is level-triggered: what a handler leaves unread or unwritten is reported again on
/// the next turn. A turn serves every socket that only has room to write, and at most
/// ``TurnOrder/descriptorsPerTurn`` sockets with something to read, those served least recently
/// first, so a client that asks rarely is answered within a turn even while a thousand others
/// keep their sockets busy (see ``TurnOrder``).
///
/// Timers run on the loop's own timerfd, made when the loop is: a timer must still work when the
/// process is out of file descriptors (that is when the accept back-off needs one), and
/// libdispatch's first timer creates descriptors of its own, and traps if it cannot.
@MainActor
public final class EventLoop {
    struct Interest: OptionSet, Sendable {
        let rawValue: UInt32

        static let readable = Interest(rawValue: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
        static let writable = Interest(rawValue: EPOLLOUT.rawValue)
    }

    /// What epoll reported for one descriptor.
    struct Readiness: Sendable {
        let events: UInt32

        var isReadable: Bool { events & Interest.readable.rawValue != 0 }
        var isWritable: Bool { events & Interest.writable.rawValue != 0 }
        /// The peer is gone or the socket failed; reported whatever the interest.
        var isHangUp: Bool { events & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 }
    }

    /// A registered descriptor; its token is never reused, so an event that was already
    /// collected for a descriptor closed meanwhile (whose number a new socket may have) is dropped.
    struct Registration: Sendable {
        fileprivate let token: UInt64
        fileprivate let descriptor: Int32
    }

    typealias Handler = @MainActor (Readiness) -> Void

    /// A timer set with ``schedule(after:_:)``, for ``cancel(_:)``.
    struct Timer: Hashable, Sendable {
        fileprivate let token: UInt64
    }

    private let epoll: Int32
    private let mainQueue: Int32
    private let timerDescriptor: Int32
    private var handlers: [UInt64: Handler] = [:]
    private var order = TurnOrder()
    private var timers: [UInt64: (deadline: ContinuousClock.Instant, fire: @MainActor () -> Void)] = [:]
    /// Token 0 is the main queue's, token 1 the timers'.
    private var nextToken: UInt64 = 2
    private static let timerToken: UInt64 = 1

    public init() {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed: errno \(errno)")
        mainQueue = _dispatch_get_main_queue_handle_4CF()
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: 0))
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, mainQueue, &event) == 0, "cannot watch the main queue: errno \(errno)")
        timerDescriptor = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC) | Int32(TFD_NONBLOCK))
        precondition(timerDescriptor >= 0, "timerfd_create failed: errno \(errno)")
        var timerEvent = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: Self.timerToken))
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, timerDescriptor, &timerEvent) == 0, "cannot watch the timer: errno \(errno)")
    }

    // MARK: Timers

    /// Calls `fire` once on the main actor after `delay`, unless cancelled first.
    @discardableResult
    func schedule(after delay: Duration, _ fire: @escaping @MainActor () -> Void) -> Timer {
        let timer = Timer(token: nextToken)
        nextToken += 1
        timers[timer.token] = (ContinuousClock.now + delay, fire)
        armTimer()
        return timer
    }

    func cancel(_ timer: Timer) {
        timers[timer.token] = nil
    }

    /// Sets the timerfd to the earliest deadline (a cancelled timer may wake it once for nothing).
    private func armTimer() {
        guard let earliest = timers.values.lazy.map(\.deadline).min() else { return }
        let remaining = max(earliest - .now, .microseconds(1))
        let (seconds, attoseconds) = remaining.components
        var setting = itimerspec(
            it_interval: timespec(tv_sec: 0, tv_nsec: 0),
            it_value: timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000)))
        _ = timerfd_settime(timerDescriptor, 0, &setting, nil)
    }

    private func fireDueTimers() {
        var expirations: UInt64 = 0
        _ = read(timerDescriptor, &expirations, MemoryLayout<UInt64>.size)
        let now = ContinuousClock.now
        let due = timers.filter { $0.value.deadline <= now }.sorted { $0.value.deadline < $1.value.deadline }
        for (token, _) in due { timers[token] = nil }
        for (_, timer) in due { timer.fire() }
        armTimer()
    }

    /// Calls `handler` on the main actor whenever `descriptor` is ready for `interest`.
    func watch(_ descriptor: Int32, for interest: Interest, handler: @escaping Handler) -> Registration {
        let registration = Registration(token: nextToken, descriptor: descriptor)
        nextToken += 1
        handlers[registration.token] = handler
        control(EPOLL_CTL_ADD, registration, interest)
        return registration
    }

    func change(_ registration: Registration, to interest: Interest) {
        control(EPOLL_CTL_MOD, registration, interest)
    }

    /// Forgets the descriptor; call it before closing the descriptor.
    func stopWatching(_ registration: Registration) {
        handlers[registration.token] = nil
        order.forget(registration.token)
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, registration.descriptor, nil)
    }

    private func control(_ operation: Int32, _ registration: Registration, _ interest: Interest) {
        var event = epoll_event(events: interest.rawValue, data: epoll_data_t(u64: registration.token))
        // Fails only for a descriptor that is not an open socket, which the callers never pass.
        _ = epoll_ctl(epoll, operation, registration.descriptor, &event)
    }

    /// Serves the sockets and the main actor for good; call it on the main thread.
    public func run() -> Never {
        // Room for every descriptor the unit allows (LimitNOFILE), so each turn sees all that are
        // ready and can choose among them.
        let capacity = 16_384
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        var ready: [(token: UInt64, events: UInt32)] = []
        ready.reserveCapacity(capacity)
        while true {
            let count = epoll_wait(epoll, events, Int32(capacity), -1)
            guard count > 0 else { continue }
            ready.removeAll(keepingCapacity: true)
            for index in 0..<Int(count) {
                let token = events[index].data.u64
                if token == 0 {
                    serveMainQueue()
                } else if token == Self.timerToken {
                    fireDueTimers()
                } else if events[index].events & ~Interest.writable.rawValue == 0 {
                    // Room to write owed output (a follower's pages): no new request comes with
                    // it, so it is not rationed. Thousands of followers catching up are served
                    // in one turn, as they were before turns were bounded.
                    handlers[token]?(Readiness(events: events[index].events))
                } else {
                    ready.append((token, events[index].events))
                }
            }
            for (token, events) in order.turn(of: ready) {
                // A handler earlier in the turn may have closed this one.
                handlers[token]?(Readiness(events: events))
            }
        }
    }

    /// Clears the main queue's wake-up, then runs what it holds; work queued meanwhile wakes it again.
    private func serveMainQueue() {
        var value: eventfd_t = 0
        _ = eventfd_read(mainQueue, &value)
        _dispatch_main_queue_callback_4CF(nil)
    }
}

/// Which ready sockets a turn of the loop serves, and in what order: at most
/// ``descriptorsPerTurn``, least recently served first. Sockets left over stay ready (interest is
/// level-triggered) and compete again on the next turn with those that became ready meanwhile.
///
/// Serving in the order epoll reports would queue a client that sends one request behind every
/// busy client ready before it: with a thousand consumers acking, a prefetched `next` waited
/// 25 ms. Here it waits for at most one turn, since a client that was not served lately goes
/// first. Busy clients still all get their turn: each one served goes to the back.
struct TurnOrder {
    /// Sockets one turn serves at most before the loop looks for newly ready ones.
    static let descriptorsPerTurn = 16

    private var turns: UInt64 = 0
    /// The turn each socket was last served in (never served: 0, first in line).
    private var lastServed: [UInt64: UInt64] = [:]

    /// The sockets of `ready` to serve now, in order; marks them served.
    mutating func turn(of ready: [(token: UInt64, events: UInt32)]) -> ArraySlice<(token: UInt64, events: UInt32)> {
        turns += 1
        var chosen = ready[...]
        if ready.count > Self.descriptorsPerTurn {
            // The least recently served, kept sorted by (turn, position in `ready`): one pass
            // with a few insertions, not a sort of every ready socket on every turn.
            var least: [(served: UInt64, index: Int)] = []
            least.reserveCapacity(Self.descriptorsPerTurn + 1)
            for (index, socket) in ready.enumerated() {
                let served = lastServed[socket.token] ?? 0
                if least.count == Self.descriptorsPerTurn, let last = least.last, served >= last.served { continue }
                let position = least.firstIndex { served < $0.served } ?? least.count
                least.insert((served, index), at: position)
                if least.count > Self.descriptorsPerTurn { least.removeLast() }
            }
            chosen = least.map { ready[$0.index] }[...]
        }
        for (token, _) in chosen { lastServed[token] = turns }
        return chosen
    }

    /// Forgets a socket the loop no longer watches.
    mutating func forget(_ token: UInt64) {
        lastServed[token] = nil
    }
}
