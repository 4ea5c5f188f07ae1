import FeedKit

/// How long a feed waits before asking its upstream again after a failure (SPEC §4).
///
/// Transient failures back off exponentially from 250 ms with jitter, up to `maximumDelay`;
/// rejections (4xx, bodies that do not decode) wait `maximumDelay` at once; an upstream's
/// `Retry-After` is honoured even beyond `maximumDelay`.
struct RetryPolicy: Sendable {
    var maximumDelay: Duration
    /// A factor in 0.5...1 applied to each transient delay, so many feeds failing together do
    /// not retry together. Injected so that tests get exact delays.
    var jitter: @Sendable () -> Double = { Double.random(in: 0.5...1.0) }

    static let firstDelay = Duration.milliseconds(250)

    /// The wait after the `failures`-th failure in a row (1 for the first).
    func delay(after error: SourceError, failures: Int) -> Duration {
        var delay: Duration
        if error.kind == .rejected {
            delay = maximumDelay
        } else {
            // 2^20 × 250 ms is three days: any larger shift only risks overflow.
            let exponential = Self.firstDelay * (1 << min(max(failures - 1, 0), 20))
            delay = min(exponential, maximumDelay) * min(max(jitter(), 0.5), 1.0)
        }
        if let retryAfter = error.retryAfter { delay = max(delay, retryAfter) }
        return delay
    }
}
