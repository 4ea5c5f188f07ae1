import Dispatch
import Foundation
import Glibc

/// Delivers SIGTERM, SIGINT and SIGHUP to the main actor without ever losing one.
///
/// The signals are blocked first thing in `main`, before any other thread exists, so every thread
/// inherits the block and a signal sent at any moment stays pending until a thread of our own
/// takes it with sigwait(3). (A Dispatch signal source is armed asynchronously, so a signal sent
/// right after start-up could be dropped.) Children inherit the block, so plugin processes are
/// started with an empty signal mask (FeedKit's Subprocess).
enum SignalListener {
    static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP]

    /// Blocks the handled signals in the calling thread, which must be the only thread so far.
    static func blockHandledSignals() {
        var set = handledSet
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Starts the thread that waits for signals and hands each to `handler` on the main actor.
    static func start(_ handler: @escaping @MainActor @Sendable (Int32) -> Void) {
        let thread = Thread {
            var set = handledSet
            while true {
                var received: Int32 = 0
                guard sigwait(&set, &received) == 0 else { continue }
                DispatchQueue.main.async { MainActor.assumeIsolated { handler(received) } }
            }
        }
        thread.name = "feedd signals"
        thread.start()
    }

    private static var handledSet: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signalNumber in handled { sigaddset(&set, signalNumber) }
        return set
    }
}
