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
/// the next turn, after every other ready descriptor had its turn.
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

    private let epoll: Int32
    private let mainQueue: Int32
    private var handlers: [UInt64: Handler] = [:]
    /// Token 0 is the main queue's.
    private var nextToken: UInt64 = 1

    public init() {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed: errno \(errno)")
        mainQueue = _dispatch_get_main_queue_handle_4CF()
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: 0))
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, mainQueue, &event) == 0, "cannot watch the main queue: errno \(errno)")
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
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, registration.descriptor, nil)
    }

    private func control(_ operation: Int32, _ registration: Registration, _ interest: Interest) {
        var event = epoll_event(events: interest.rawValue, data: epoll_data_t(u64: registration.token))
        // Fails only for a descriptor that is not an open socket, which the callers never pass.
        _ = epoll_ctl(epoll, operation, registration.descriptor, &event)
    }

    /// Serves the sockets and the main actor for good; call it on the main thread.
    public func run() -> Never {
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        while true {
            let count = epoll_wait(epoll, events, Int32(capacity), -1)
            guard count > 0 else { continue }
            for index in 0..<Int(count) {
                let token = events[index].data.u64
                if token == 0 {
                    serveMainQueue()
                } else if let handler = handlers[token] {
                    handler(Readiness(events: events[index].events))
                }
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
