import FeedKit
import Foundation

/// How a ``StreamPump`` reads one kind of libnats source (a KV watcher, a subscription).
struct BlockingSource<Element: Sendable>: Sendable {
    enum Next: Sendable {
        case element(Element)
        /// Nothing arrived within the poll interval.
        case idle
        /// The source is dead (its connection was closed): close it and open a new one.
        case broken
    }

    /// Open the source again after every reconnection. KV watchers need it: their ordered
    /// consumer only notices a lost server after missed heartbeats, while a new watcher replays
    /// the latest value of every key at once. Core subscriptions are restored by libnats itself.
    let reopenAfterReconnect: Bool
    let open: @Sendable () throws(NATSError) -> UnsafeHandle
    /// Waits at most ``StreamPump/pollMilliseconds`` for the next element.
    let next: @Sendable (UnsafeHandle) -> Next
    let close: @Sendable (UnsafeHandle) -> Void
}

/// A thread of its own that calls a source's blocking `next` and yields what it returns to an
/// `AsyncStream`, reopening the source when it breaks or the connection comes back.
///
/// Each call waits at most ``pollMilliseconds``, so the thread notices ``stop()`` that fast; the
/// libnats handle it owns is opened, read and closed by this thread alone.
final class StreamPump: Sendable {
    static let pollMilliseconds: Int64 = 200

    private struct State {
        var stopped = false
        var firstOpenTried: [CheckedContinuation<Void, Never>]? = []
        var finished = false
        var finishedWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    init<Element: Sendable>(
        name: String, source: BlockingSource<Element>, events: ConnectionEvents, continuation: AsyncStream<Element>.Continuation
    ) {
        let thread = Thread { [self] in
            pump(source, events: events, continuation: continuation)
            continuation.finish()
            markFirstOpenTried()
            let waiters = state.withLock { state in
                state.finished = true
                defer { state.finishedWaiters.removeAll() }
                return state.finishedWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.name = name
        thread.start()
    }

    func stop() { state.withLock { $0.stopped = true } }

    /// Returns once the thread tried to open its source for the first time (or ended).
    func firstOpenTried() async {
        await withCheckedContinuation { continuation in
            let waiting = state.withLock { state in
                guard state.firstOpenTried != nil else { return false }
                state.firstOpenTried!.append(continuation)
                return true
            }
            if !waiting { continuation.resume() }
        }
    }

    /// Returns once the thread has closed its source and ended.
    func finished() async {
        await withCheckedContinuation { continuation in
            let waiting = state.withLock { state in
                guard !state.finished else { return false }
                state.finishedWaiters.append(continuation)
                return true
            }
            if !waiting { continuation.resume() }
        }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func markFirstOpenTried() {
        let waiters = state.withLock { state in
            defer { state.firstOpenTried = nil }
            return state.firstOpenTried ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    private func pump<Element>(_ source: BlockingSource<Element>, events: ConnectionEvents, continuation: AsyncStream<Element>.Continuation) {
        var handle: UnsafeHandle?
        var openedAtConnection = -1
        defer { if let handle { source.close(handle) } }
        while !isStopped {
            let connection = events.connections
            if handle != nil, source.reopenAfterReconnect, connection != openedAtConnection {
                source.close(handle!)
                handle = nil
            }
            guard let open = handle else {
                if events.state == .connected {
                    openedAtConnection = connection
                    handle = try? source.open()
                }
                markFirstOpenTried()
                if handle == nil { usleep(UInt32(Self.pollMilliseconds) * 1_000) }
                continue
            }
            switch source.next(open) {
            case .element(let element): continuation.yield(element)
            case .idle: continue
            case .broken:
                source.close(open)
                handle = nil
            }
        }
    }
}
