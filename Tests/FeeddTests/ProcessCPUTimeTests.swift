import Foundation
import Testing
import TestSupport

/// The daemon's CPU for a span, as `feedd-bench feeds` prints it per read: every thread's, those
/// that ended within the span included (the `rss` adapter reads a document's body on a thread of
/// its own, which has exited by the time the last page is delivered).
@Suite struct ProcessCPUTimeTests {
    @Test func countsAThreadThatHasExited() throws {
        let before = try processCPUSeconds(of: getpid())
        // A thread that spins for 40 ms of its own CPU time and exits, joined before measuring.
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { _ in
            var now = timespec()
            repeat { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) } while Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 < 0.04
            return nil
        }, nil)
        try #require(started == 0)
        pthread_join(thread, nil)
        let spent = try processCPUSeconds(of: getpid()) - before
        #expect(spent >= 0.04, "the process's CPU time grew by \(spent) s over a thread that spent 0.04 s and exited")
    }
}
