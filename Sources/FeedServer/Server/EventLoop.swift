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
/// Sockets are watched one-shot: epoll reports a ready socket once, and the loop queues it in its
/// ``TurnOrder`` until its turn comes; after its handler has run, the loop arms it again with its
/// current interest, and epoll checks it then, so what the handler left unread or unwritten is
/// reported again at once. A client connection's socket is watched edge-triggered instead
/// (``watch(_:for:edgeTriggered:peek:handler:)``): it stays armed, epoll reports it again only
/// when something new arrives, and a handler that leaves input unread says so (``serveAgain(_:)``);
/// that saves the `epoll_ctl` of every request (3% of the main thread in an ack storm, one call
/// per round trip). A turn serves at most ``TurnOrder/descriptorsPerTurn`` sockets with something
/// to read, those whose requests are brief (a `ping`) first, then those served least recently,
/// so a client that asks rarely is answered within a turn even while a thousand others keep
/// their sockets busy; then sockets that only write; each for at most ``TurnOrder/timePerTurn``.
/// Output queued outside a socket's turn is written in a turn of its own (``serveWrite(_:)``),
/// so all the loop's socket work is under those bounds.
///
/// (Level-triggered interest did the same with less code, but every turn's `epoll_wait` then
/// reported every socket still waiting for its turn again: with a thousand consumers acking, the
/// loop spent 60 µs a turn, a third of its time, reading the same thousand events.)
///
/// Work deferred with ``afterTurn(_:)`` runs at the end of each turn, after the handlers: a feed
/// starts its next fetch there, once the turn's answers are written.
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
        /// The peer will send nothing more: what is left to read ends with end of file.
        var peerStoppedSending: Bool { events & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue) != 0 }
    }

    /// A registered descriptor; its token is never reused, so an event that was already
    /// collected for a descriptor closed meanwhile (whose number a new socket may have) is dropped.
    struct Registration: Sendable {
        fileprivate let token: UInt64
        fileprivate let descriptor: Int32
    }

    typealias Handler = @MainActor (Readiness) -> Void
    typealias PeekRequests = @MainActor () -> TurnOrder.Kind?

    /// A timer set with ``schedule(after:_:)``, for ``cancel(_:)``.
    struct Timer: Hashable, Sendable {
        fileprivate let token: UInt64
    }

    /// A watched socket: its handler, what it is watched for, and whether epoll may report it now
    /// (a one-shot socket is not while it waits for its turn or its handler runs: then a change of
    /// interest is only noted, and takes effect when the loop arms it again after the handler; an
    /// edge-triggered one always is).
    private struct Watched {
        let descriptor: Int32
        let handler: Handler
        /// What its waiting input asks, read without taking it (``TurnOrder/Kind``), for a
        /// socket whose last turn does not tell yet.
        let peek: PeekRequests?
        var interest: Interest
        var isArmed: Bool
        let isEdgeTriggered: Bool
    }

    private let epoll: Int32
    private let mainQueue: Int32
    private let timerDescriptor: Int32
    private var watched: [UInt64: Watched] = [:]
    private var order = TurnOrder()
    private var timers = TimerQueue<@MainActor () -> Void>()
    /// What runs once the turn is over, in the order it was given.
    private var deferred: [@MainActor () -> Void] = []
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

    // MARK: After the turn

    /// Runs `work` on the main actor once the current turn is over (the engine's ``TurnEnd``):
    /// after the handlers of the turn, before the loop waits again. Work given meanwhile runs
    /// in the same pass, after it.
    public func afterTurn(_ work: @escaping @MainActor () -> Void) {
        deferred.append(work)
    }

    private func runDeferredWork() {
        var index = 0
        while index < deferred.count {
            let work = deferred[index]
            index += 1
            work()
        }
        deferred.removeAll(keepingCapacity: true)
    }

    // MARK: Timers

    /// Calls `fire` once on the main actor after `delay`, unless cancelled first.
    @discardableResult
    func schedule(after delay: Duration, _ fire: @escaping @MainActor () -> Void) -> Timer {
        let timer = Timer(token: nextToken)
        nextToken += 1
        if let wakeUp = timers.schedule(timer.token, at: ContinuousClock.now + delay, fire) { setTimer(to: wakeUp) }
        return timer
    }

    func cancel(_ timer: Timer) {
        timers.cancel(timer.token)
    }

    private func setTimer(to deadline: ContinuousClock.Instant) {
        let remaining = max(deadline - .now, .microseconds(1))
        let (seconds, attoseconds) = remaining.components
        var setting = itimerspec(
            it_interval: timespec(tv_sec: 0, tv_nsec: 0),
            it_value: timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000)))
        _ = timerfd_settime(timerDescriptor, 0, &setting, nil)
    }

    private func fireDueTimers() {
        var expirations: UInt64 = 0
        _ = read(timerDescriptor, &expirations, MemoryLayout<UInt64>.size)
        for fire in timers.takeDue(at: .now) { fire() }
        if let wakeUp = timers.rearm() { setTimer(to: wakeUp) }
    }

    /// Calls `handler` on the main actor whenever `descriptor` is ready for `interest`. An
    /// edge-triggered socket's handler must read until the socket has nothing more, or call
    /// ``serveAgain(_:)`` for what it left: epoll reports only what arrives after. A socket whose
    /// requests may be brief gives `peek`, and says after each turn what it asked
    /// (``expect(_:_:)``); without it, its turns are ordinary.
    func watch(
        _ descriptor: Int32, for interest: Interest, edgeTriggered: Bool = false, peek: PeekRequests? = nil,
        handler: @escaping Handler
    ) -> Registration {
        let registration = Registration(token: nextToken, descriptor: descriptor)
        nextToken += 1
        watched[registration.token] = Watched(
            descriptor: descriptor, handler: handler, peek: peek, interest: interest, isArmed: true, isEdgeTriggered: edgeTriggered)
        order.register(registration.token, kind: peek == nil ? .ordinary : nil)
        control(EPOLL_CTL_ADD, registration.token, descriptor, interest, edgeTriggered: edgeTriggered)
        return registration
    }

    /// (A change makes epoll check the socket again at once, so an edge-triggered socket whose
    /// reading resumes is reported if input waits.)
    func change(_ registration: Registration, to interest: Interest) {
        guard var socket = watched[registration.token] else { return }
        socket.interest = interest
        watched[registration.token] = socket
        if socket.isArmed {
            control(EPOLL_CTL_MOD, registration.token, socket.descriptor, interest, edgeTriggered: socket.isEdgeTriggered)
        }
    }

    /// Queues an edge-triggered socket for another turn, with what was reported for it this
    /// turn: its handler left input unread (its share of the turn), which epoll will not report again.
    func serveAgain(_ registration: Registration, _ readiness: Readiness) {
        guard watched[registration.token] != nil else { return }
        order.add(registration.token, events: readiness.events)
    }

    /// What the socket's next requests are expected to be: what its last turn asked. A socket
    /// whose requests are brief goes ahead of the other readers (``TurnOrder``).
    func expect(_ registration: Registration, _ kind: TurnOrder.Kind) {
        order.expect(registration.token, kind)
    }

    /// Queues an edge-triggered socket for a turn of its own to write output that was queued
    /// outside its turn (a page pushed to a thousand followers, an ack's answer once its commit
    /// is durable): it is served as if epoll had reported room to write, bounded like any turn,
    /// so such writes never hold up another client's request for more than a turn.
    func serveWrite(_ registration: Registration) {
        guard watched[registration.token] != nil else { return }
        order.add(registration.token, events: Interest.writable.rawValue)
    }

    /// Forgets the descriptor; call it before closing the descriptor.
    func stopWatching(_ registration: Registration) {
        watched[registration.token] = nil
        order.forget(registration.token)
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, registration.descriptor, nil)
    }

    private func control(_ operation: Int32, _ token: UInt64, _ descriptor: Int32, _ interest: Interest, edgeTriggered: Bool) {
        let mode = edgeTriggered ? EPOLLET.rawValue : EPOLLONESHOT.rawValue
        var event = epoll_event(events: interest.rawValue | mode, data: epoll_data_t(u64: token))
        // Fails only for a descriptor that is not an open socket, which the callers never pass.
        _ = epoll_ctl(epoll, operation, descriptor, &event)
    }

    /// Runs a socket's handler, then arms a one-shot socket again unless the handler stopped
    /// watching it.
    private func serve(_ token: UInt64, _ events: UInt32) {
        guard let socket = watched[token] else { return }
        socket.handler(Readiness(events: events))
        guard !socket.isEdgeTriggered, var socket = watched[token] else { return }
        socket.isArmed = true
        watched[token] = socket
        control(EPOLL_CTL_MOD, token, socket.descriptor, socket.interest, edgeTriggered: false)
    }

    /// Serves the sockets and the main actor for good; call it on the main thread.
    public func run() -> Never {
        // Room for every descriptor the unit allows (LimitNOFILE) in one call.
        let capacity = 16_384
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        while true {
            // The end of the previous turn (and, the first time, of what ran before the loop).
            runDeferredWork()
            // Sockets waiting for their turn: only look for news, do not sleep.
            let count = epoll_wait(epoll, events, Int32(capacity), order.isEmpty ? -1 : 0)
            for index in 0..<Int(max(count, 0)) {
                let token = events[index].data.u64
                let reported = events[index].events
                if token == 0 {
                    serveMainQueue()
                } else if token == Self.timerToken {
                    fireDueTimers()
                } else if let socket = watched[token] {
                    // (An event collected for a socket a handler closed earlier in this batch is
                    // dropped: its token is gone from `watched` and never comes back.)
                    // One-shot: epoll reports this socket no more until `serve` arms it again.
                    if !socket.isEdgeTriggered { watched[token]!.isArmed = false }
                    order.add(token, events: reported) { socket.peek?() ?? nil }
                }
            }
            order.startTurn()
            while let (token, events) = order.next() {
                // A handler earlier in the turn may have closed this one.
                serve(token, events)
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

/// The sockets waiting for their turn, and which of them each turn serves: first sockets with
/// something to read, at most ``descriptorsPerTurn`` of them, then sockets that only have output
/// to write (room reported by epoll, or output queued outside their own turn,
/// ``EventLoop/serveWrite(_:)``); each of the two for at most ``timePerTurn`` of the clock once it
/// has served one. In each line the least recently served go first (among those, the first
/// reported first); a new connection counts as served when it connected. A socket served goes
/// back to epoll, and comes back here when it is ready again, behind every socket that waited
/// longer since its last turn.
///
/// Serving in the order epoll reports would queue a client that sends one request behind every
/// busy client ready before it: with a thousand consumers acking, a prefetched `next` waited
/// 25 ms. Here it waits for at most one turn, since a client that was not served lately goes
/// first. Busy clients still all get their turn: each one served goes to the back.
///
/// Brief requests go first (``Kind``): a socket whose requests are brief (a `ping`) is served
/// ahead of the other readers however lately it was served. By recency alone a client that pings
/// every millisecond is always more recently served than a consumer that comes back thirty times
/// a second, and its `ping` waited behind every consumer of a burst (18–49 ms at p99 in an ack
/// storm). So that brief sockets cannot starve the others, a turn serves at least one of the
/// other readers waiting, past its bounds if it must: a socket that is always busy is served
/// within as many turns as there are other busy sockets, however many brief ones are ready.
///
/// Turns are bounded by time as well as count: one socket's turn costs from a hundred bytes
/// written (an ack's answer) to a socket buffer's worth (a follower catching up on 22 KB pages,
/// a new follower's first window), and a thousand followers written in one turn held a `ping`
/// up for tens of milliseconds. A socket is served at most once a turn in each line.
struct TurnOrder {
    /// Sockets with something to read one turn serves at most before the loop looks for newly ready ones.
    static let descriptorsPerTurn = 16
    /// How long a turn goes on serving the sockets of one line once it has served one of them.
    static let timePerTurn: Duration = .microseconds(200)

    /// What a socket with something to read is expected to ask, which decides its line. Judged
    /// by the requests' ops, not by a turn's measured cost: a consumer's `ack` costs its turn as
    /// little as a `ping` (its answer waits for a commit and is written later), and a new
    /// connection has no past turns to measure. What its last turn asked tells it (the socket's
    /// owner says, ``EventLoop/expect(_:_:)``); before its first request, its input is looked at
    /// without being taken (``add(_:events:peek:)``).
    enum Kind {
        /// Nothing but a few requests answered at once from memory (``Request/isBrief``).
        case brief
        /// Anything else, or nothing known.
        case ordinary
    }

    private struct Place: Comparable {
        /// The turn the socket was last served in (never: 0, first in line).
        let lastServed: UInt64
        /// When it was reported, among the sockets reported so far; also names the place, as a
        /// socket's current one (``Waiting/arrival``).
        let arrival: UInt64
        let token: UInt64

        static func < (a: Place, b: Place) -> Bool { (a.lastServed, a.arrival) < (b.lastServed, b.arrival) }
    }

    /// The three lines a waiting socket can be in.
    private enum Line {
        case briefReaders, readers, writers
    }

    /// A waiting socket: what was reported for it, and the arrival of its current place (a place
    /// of another arrival is stale: the socket moved from the writers' line to a readers' line).
    private struct Waiting {
        var events: UInt32
        var arrival: UInt64
    }

    /// What is known of a socket the order was told about (``register(_:kind:)``): the turn it was
    /// last served in, and what it is expected to ask, if anything is known yet.
    private struct Known {
        var lastServed: UInt64
        var kind: Kind?
    }

    /// Where the current turn is: serving readers (how many so far, whether an ordinary one was
    /// among them, since when), or writers.
    private enum Phase {
        case reading(served: Int, servedOrdinary: Bool, since: ContinuousClock.Instant?)
        case writing(since: ContinuousClock.Instant?)
        case over
    }

    private let now: () -> ContinuousClock.Instant
    private var turns: UInt64 = 0
    private var phase = Phase.over
    private var arrivals: UInt64 = 0
    private var known: [UInt64: Known] = [:]
    private var waiting: [UInt64: Waiting] = [:]
    /// The waiting sockets' places, in their lines. A place whose socket was served or forgotten
    /// since, or moved to a readers' line, stays until it surfaces, and is skipped then (tokens
    /// are never reused).
    private var briefReaders = MinHeap<Place>()
    private var readers = MinHeap<Place>()
    private var writers = MinHeap<Place>()

    /// An order whose turns are timed on `now` (a test's own clock).
    init(now: @escaping () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.now = now
    }

    var isEmpty: Bool { waiting.isEmpty }

    private static func onlyWrites(_ events: UInt32) -> Bool { events & ~EventLoop.Interest.writable.rawValue == 0 }

    /// A new socket, and what it is expected to ask (nil: to be looked at when it has something
    /// to read). It waits behind the sockets already waiting, as one served now would. (Taken as
    /// never served, a thousand followers connecting at once, each with a window of pages to
    /// write in its first turn, all went ahead of a client waiting for a `pong`.) A socket the
    /// order was not told of counts as never served, and ordinary.
    mutating func register(_ token: UInt64, kind: Kind?) {
        known[token] = Known(lastServed: turns, kind: kind)
    }

    /// What a registered socket is expected to ask from now on (what its last turn asked); a place
    /// it holds already stays where it is.
    mutating func expect(_ token: UInt64, _ kind: Kind) {
        known[token]?.kind = kind
    }

    /// Queues a socket epoll reported, or one with output to write; a socket already waiting
    /// keeps its place, unless it only had output and now has something to read too: then it
    /// joins a readers' line. Which one is what the socket is expected to ask; for a socket of
    /// which nothing is known yet, `peek` looks at its input (nil: nothing tells, ordinary).
    mutating func add(_ token: UInt64, events: UInt32, peek: () -> Kind? = { nil }) {
        if let earlier = waiting[token] {
            let joinsReaders = Self.onlyWrites(earlier.events) && !Self.onlyWrites(events)
            let arrival = joinsReaders ? enqueue(token, reading: true, peek) : earlier.arrival
            waiting[token] = Waiting(events: earlier.events | events, arrival: arrival)
            return
        }
        let arrival = enqueue(token, reading: !Self.onlyWrites(events), peek)
        waiting[token] = Waiting(events: events, arrival: arrival)
    }

    /// Puts a socket at the back of its line: the writers', or the readers' line of what it is
    /// expected to ask. Returns its place's arrival.
    private mutating func enqueue(_ token: UInt64, reading: Bool, _ peek: () -> Kind?) -> UInt64 {
        let socket = known[token] ?? Known(lastServed: 0, kind: .ordinary)
        arrivals += 1
        let place = Place(lastServed: socket.lastServed, arrival: arrivals, token: token)
        guard reading else {
            writers.push(place)
            return arrivals
        }
        var kind = socket.kind
        if kind == nil {
            kind = peek()
            known[token]?.kind = kind
        }
        if kind == .brief { briefReaders.push(place) } else { readers.push(place) }
        return arrivals
    }

    /// Starts a turn; ``next()`` then gives its sockets one by one.
    mutating func startTurn() {
        turns += 1
        phase = .reading(served: 0, servedOrdinary: false, since: nil)
    }

    /// The next socket to serve in the turn, with what was reported for it, marked served; nil
    /// once the turn is over.
    mutating func next() -> (token: UInt64, events: UInt32)? {
        if case .reading(let served, let servedOrdinary, let since) = phase {
            let time = now()
            let withinBounds = served < Self.descriptorsPerTurn && since.map { time - $0 < Self.timePerTurn } ?? true
            if withinBounds, let socket = take(from: .briefReaders) {
                phase = .reading(served: served + 1, servedOrdinary: servedOrdinary, since: since ?? time)
                return socket
            }
            // Within the bounds, or the one a turn owes the ordinary readers however many brief ones wait.
            if withinBounds || !servedOrdinary, let socket = take(from: .readers) {
                phase = .reading(served: served + 1, servedOrdinary: true, since: since ?? time)
                return socket
            }
            phase = .writing(since: nil)
        }
        guard case .writing(let since) = phase else { return nil }
        let time = now()
        guard since.map({ time - $0 < Self.timePerTurn }) ?? true, let socket = take(from: .writers) else {
            phase = .over
            return nil
        }
        phase = .writing(since: since ?? time)
        return socket
    }

    /// The first socket of `line` still waiting there and not served in this turn.
    private mutating func take(from line: Line) -> (token: UInt64, events: UInt32)? {
        while let place = first(of: line) {
            guard let socket = waiting[place.token], socket.arrival == place.arrival else {
                dropFirst(of: line)
                continue
            }
            // The line is by last turn: if its first was served in this turn, so were all the rest.
            guard place.lastServed < turns else { return nil }
            dropFirst(of: line)
            waiting[place.token] = nil
            known[place.token, default: Known(lastServed: 0, kind: .ordinary)].lastServed = turns
            return (place.token, socket.events)
        }
        return nil
    }

    private func first(of line: Line) -> Place? {
        switch line {
        case .briefReaders: briefReaders.first
        case .readers: readers.first
        case .writers: writers.first
        }
    }

    private mutating func dropFirst(of line: Line) {
        switch line {
        case .briefReaders: briefReaders.popFirst()
        case .readers: readers.popFirst()
        case .writers: writers.popFirst()
        }
    }

    /// Forgets a socket the loop no longer watches.
    mutating func forget(_ token: UInt64) {
        known[token] = nil
        waiting[token] = nil
    }
}
