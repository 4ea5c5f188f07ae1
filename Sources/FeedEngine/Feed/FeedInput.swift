import FeedKit
import FeedState

/// What can happen to a feed: every change to one comes through ``Feed/handle(_:)`` as one of
/// these, from its clients (through ``FeedService``), its upstream call, its store, the fleet,
/// or the daemon. Answers go to the completions, and events to the clients' sinks.
enum FeedInput {
    // MARK: A client, through the service

    /// Starts reading after `after` (a consumer: after its stored cursor if nil), or replaces
    /// the client's subscription; a consumer read elsewhere here is taken over.
    case subscribe(any ClientHandle, consumer: String?, after: Int?, follows: Bool, answer: (Result<Subscribed, ServiceError>) -> Void)
    /// Asks for `count` more pages, once every page delivered before is acknowledged; `subscribed`
    /// (the subscription the service made for it, if it did) is what a success answers.
    case next(ClientID, count: Int, replyTo: ReplyTag?, subscribed: Subscribed?, answer: (Result<Subscribed?, ServiceError>) -> Void)
    /// Marks pages up to `page` consumed; answers the cursor once durable.
    case acknowledge(ClientID, page: Int, answer: (Result<Int, ServiceError>) -> Void)
    case unsubscribe(ClientID)
    /// The client can take pages again.
    case resume(ClientID)
    /// Starts a new generation; `requester`'s own `refreshed` carries `replyTo`.
    case refresh(requester: ClientID?, replyTo: ReplyTag?, answer: (Result<Int, StoreError>) -> Void)

    // MARK: The upstream, the store, the fleet

    /// Pages came: from call `id` (fetched, or read from the store), or published by the fleet.
    case pagesArrived(ArrivingPages)
    /// Call `id` returned.
    case callReturned(id: Int, CallOutcome)
    /// The deadline of the call in flight may have passed.
    case deadline
    /// Timer `id` (a backoff, a wait for the fleet) went off.
    case timer(id: Int)
    /// What the fleet said or did.
    case fleet(FleetInput)
    /// The turn of the event loop in which the feed deferred its look for upstream work is over.
    case turnEnded

    // MARK: The daemon

    /// A reload that keeps what the pages contain (`timeout`, `poll`, `prefetch`, …).
    case reload(FeedDefinition)
}

/// Pages on their way into a feed (see ``Feed/pagesArrived(_:)``, the one door for pages).
enum ArrivingPages {
    /// Fetched by call `id`; `fromStore`: read from the state directory instead.
    case call(id: Int, [FetchedPage], fromStore: Bool)
    /// Published by an instance of the fleet (this one included).
    case fleet(FleetPage)
}

/// How an upstream call ended.
enum CallOutcome {
    /// A run of fetches (its last pages, and why it stopped), which started at `startedAt`.
    case fetched(PageFetch.Run, startedAt: ContinuousClock.Instant)
    /// A stored page read back, or nil if it could not be.
    case read((page: Page, next: NextPage)?)
    /// A wait for new data ended.
    case waited(FleetLookOutcome, httpRequests: Int)
}

/// What the fleet tells a shared feed.
enum FleetInput {
    /// The daemon's link to the fleet exists now.
    case attached(FleetLink)
    /// The join asked for answered.
    case joined(FleetGeneration)
    /// The join asked for failed; `reachable`: the fleet could be reached all the same.
    case joinFailed(FleetError, reachable: Bool)
    /// A second passed since a failed join.
    case retryJoin
    /// A generation the fleet started (a refresh on any instance).
    case generationAnnounced(FleetGeneration)
    /// `consumer` was claimed by another instance.
    case claimedElsewhere(consumer: String)
}
