import CEventLoop

/// The event loop's descriptors and timers for another front of the daemon: the HTTP front
/// watches libmicrohttpd's epoll descriptor here, so its requests are served on the main actor
/// within the same wake-ups as the socket's, and sets its timers on the loop's own timerfd.
extension EventLoop {
    /// A descriptor watched with ``watchReadable(_:handler:)``.
    public struct ReadableWatch: Sendable {
        fileprivate let registration: Registration
    }

    /// A timer set with ``scheduleTimer(after:_:)``.
    public struct ScheduledTimer: Hashable, Sendable {
        fileprivate let timer: Timer
    }

    /// Calls `handler` on the main actor whenever `descriptor` is readable (or hung up). Like a
    /// socket, it is reported once per turn and armed again after `handler` has run, so what is
    /// left unread is reported again on the next turn.
    public func watchReadable(_ descriptor: Int32, handler: @escaping @MainActor () -> Void) -> ReadableWatch {
        ReadableWatch(registration: watch(descriptor, for: .readable) { _ in handler() })
    }

    /// Calls `handler` on the main actor when the peer of `descriptor`, a connected socket, hangs
    /// up (or the socket fails); what it sends does not wake it.
    public func watchHangUp(_ descriptor: Int32, handler: @escaping @MainActor () -> Void) -> ReadableWatch {
        ReadableWatch(registration: watch(descriptor, for: Interest(rawValue: EPOLLRDHUP.rawValue)) { _ in handler() })
    }

    /// Forgets a descriptor; call it before closing the descriptor.
    public func stopWatching(_ watch: ReadableWatch) {
        stopWatching(watch.registration)
    }

    /// Calls `fire` once on the main actor after `delay`, unless cancelled first.
    @discardableResult
    public func scheduleTimer(after delay: Duration, _ fire: @escaping @MainActor () -> Void) -> ScheduledTimer {
        ScheduledTimer(timer: schedule(after: delay, fire))
    }

    /// Cancels a timer that has not fired; a fired or cancelled one is left alone.
    public func cancel(_ timer: ScheduledTimer) {
        cancel(timer.timer)
    }
}
