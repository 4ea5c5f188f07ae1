import Synchronization

/// Counts the HTTP requests made on behalf of one fetch of a feed's pages, whichever adapter and
/// transport make them: the engine sets ``current`` around each fetch, and the transport counts
/// every request it sends, each hop of a redirect included. So a feed's `upstream_requests` counts
/// requests, not calls to its adapter: an Atom feed's second page, cut from the document its first
/// GET brought, costs none.
public final class HTTPRequestMeter: Sendable {
    /// The meter of the fetch the current task works for; nil outside the engine's fetches.
    @TaskLocal public static var current: HTTPRequestMeter?

    private let requests = Atomic<Int>(0)

    /// A meter at zero.
    public init() {}

    /// The requests counted so far.
    public var count: Int { requests.load(ordering: .relaxed) }

    /// One more request went out.
    public func countRequest() {
        requests.add(1, ordering: .relaxed)
    }
}
