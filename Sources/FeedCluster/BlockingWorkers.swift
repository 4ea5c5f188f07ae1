import FeedKit
import Foundation

/// A few threads of feedd's own that make libnats's blocking calls, so that no caller's thread —
/// least of all the main actor's event loop — ever waits on the network.
///
/// Every libnats call that can wait (a request to JetStream, a connect) is bounded by the
/// connection's request timeout, so a worker is never held longer than that; callers `await`
/// and are resumed with the result. The queue is first in, first out.
final class BlockingWorkers: Sendable {
    private struct Queue {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var stopped = false
        var runningThreads = 0
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let queue = Locked(Queue())
    private let jobsWaiting = DispatchSemaphore(value: 0)
    private let threadCount: Int

    /// Starts `threadCount` threads named `name-1`, `name-2`, ….
    init(threadCount: Int, name: String) {
        self.threadCount = threadCount
        queue.withLock { $0.runningThreads = threadCount }
        for index in 1...threadCount {
            let thread = Thread { [self] in
                work()
                let waiters = queue.withLock { queue in
                    queue.runningThreads -= 1
                    guard queue.runningThreads == 0 else { return [CheckedContinuation<Void, Never>]() }
                    defer { queue.stopWaiters.removeAll() }
                    return queue.stopWaiters
                }
                for waiter in waiters { waiter.resume() }
            }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    /// Runs `body` on a worker thread and returns its result to the awaiting caller.
    func run<Value: Sendable>(_ body: @escaping @Sendable () throws(NATSError) -> Value) async throws(NATSError) -> Value {
        let result: Result<Value, NATSError> = await withCheckedContinuation { continuation in
            enqueue {
                do throws(NATSError) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Lets every thread finish the jobs already queued, then exit; returns when all have.
    /// Jobs queued later never run.
    func stop() async {
        await withCheckedContinuation { continuation in
            let running = queue.withLock { queue in
                queue.stopped = true
                if queue.runningThreads > 0 { queue.stopWaiters.append(continuation) }
                return queue.runningThreads > 0
            }
            for _ in 0..<threadCount { jobsWaiting.signal() }
            if !running { continuation.resume() }
        }
    }

    private func enqueue(_ job: @escaping @Sendable () -> Void) {
        queue.withLock { $0.jobs.append(job) }
        jobsWaiting.signal()
    }

    private func work() {
        while true {
            jobsWaiting.wait()
            let job: (@Sendable () -> Void)? = queue.withLock { queue in
                guard queue.head < queue.jobs.count else { return nil }
                let job = queue.jobs[queue.head]
                queue.head += 1
                // Compact now and then rather than shifting the array on every job.
                if queue.head > 64, queue.head * 2 > queue.jobs.count {
                    queue.jobs.removeFirst(queue.head)
                    queue.head = 0
                }
                return job
            }
            guard let job else {
                if queue.withLock({ $0.stopped }) { return }
                continue
            }
            job()
        }
    }
}
