import FeedKit
import Foundation

/// How often the machine itself stops a busy thread: one thread per core reads the clock in a
/// tight loop, and every gap between two readings longer than a threshold is a time the thread
/// did not run (the hypervisor took the virtual CPU, or the kernel ran something else). No
/// feedd runs meanwhile; the figure says how much of a latency tail the machine alone causes.
enum MachineNoise {
    struct Pauses {
        /// Pauses longer than 1 ms, per second and core.
        let overOneMillisecondPerSecond: Double
        /// The longest pause (ms).
        let longest: Double
    }

    static func measure(seconds: Double = 5) -> Pauses {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let results = Locked<[(count: Int, longest: Duration)]>([])
        let threads = (0..<cores).map { _ in
            Thread {
                let started = ContinuousClock.now
                var previous = started
                var count = 0
                var longest = Duration.zero
                while previous - started < .seconds(seconds) {
                    let now = ContinuousClock.now
                    let gap = now - previous
                    if gap > .milliseconds(1) { count += 1 }
                    longest = max(longest, gap)
                    previous = now
                }
                results.withLock { $0.append((count, longest)) }
            }
        }
        threads.forEach { $0.start() }
        while threads.contains(where: { !$0.isFinished }) { Thread.sleep(forTimeInterval: 0.05) }
        let all = results.withLock { $0 }
        return Pauses(
            overOneMillisecondPerSecond: Double(all.map(\.count).reduce(0, +)) / Double(cores) / seconds,
            longest: all.map(\.longest).max()?.milliseconds ?? 0)
    }
}
