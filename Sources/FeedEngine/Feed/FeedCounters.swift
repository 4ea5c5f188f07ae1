/// What one feed has done since the daemon started, for the metrics (SPEC §10). Counters only
/// grow: a feed replaced by a reload (its pages changed) carries them on; only a feed removed and
/// added again starts from zero, as a new series.
public struct FeedCounters: Sendable, Equatable {
    /// Requests made to the upstream, whatever their outcome: HTTP requests for a source that
    /// speaks HTTP, pages asked of the adapter for any other (a file, an exec plugin, a merge's members).
    public var upstreamRequests = 0
    /// Pages asked of the adapter: a call of ``SourceAdapter/fetch(_:pages:)`` that brought
    /// several counts each, as the calls of one page each would have.
    public var fetches = 0
    /// Set once the feed's adapter made an HTTP request: from then on its calls count as requests
    /// no more, since one served from what an earlier request brought cost the upstream nothing.
    private var requestsAreHTTP = false
    /// Requests that failed (and will be retried).
    public var upstreamErrors = 0
    /// Pages fetched from the upstream and stored in the cache.
    public var pagesFetched = 0
    /// Pages handed to subscribers: a page sent to three subscribers counts three times.
    public var pagesDelivered = 0
    /// How long each upstream request took, including decoding and encoding its page.
    public var upstreamDuration = DurationHistogram()

    /// Counters at zero.
    public init() {}

    /// Counts one run's work against the upstream: `adapterCalls` calls that made `httpRequests`
    /// HTTP requests.
    mutating func count(adapterCalls: Int, httpRequests: Int) {
        fetches += adapterCalls
        if httpRequests > 0 { requestsAreHTTP = true }
        upstreamRequests += requestsAreHTTP ? httpRequests : adapterCalls
    }
}

/// A histogram of durations over fixed buckets, as Prometheus histograms count them.
public struct DurationHistogram: Sendable, Equatable {
    /// The upper bounds of the buckets, in seconds; the last bucket, +Inf, is implied.
    /// From 5 ms (a loopback upstream) to 30 s (past the longest sensible `timeout`).
    public static let bounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    /// How many durations fell into each bucket (not cumulative); one more than `bounds`, for +Inf.
    public private(set) var bucketCounts = [Int](repeating: 0, count: bounds.count + 1)
    /// The sum of every recorded duration, in seconds.
    public private(set) var sum = 0.0
    /// How many durations were recorded.
    public private(set) var count = 0

    /// An empty histogram.
    public init() {}

    /// Counts `duration` in its bucket.
    public mutating func record(_ duration: Duration) {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        let bucket = Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count
        bucketCounts[bucket] += 1
        sum += seconds
        count += 1
    }

    /// The duration since `start`, recorded.
    public mutating func record(since start: ContinuousClock.Instant) {
        record(ContinuousClock.now - start)
    }

    /// For each bound (and then +Inf), how many durations were at most that long, as the
    /// `le` buckets of a Prometheus histogram count them.
    public var cumulativeCounts: [Int] {
        var total = 0
        return bucketCounts.map { count in
            total += count
            return total
        }
    }
}
