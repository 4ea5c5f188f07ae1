import FeedKit
import FeedState

/// The engine's only door for the fronts (the Unix socket server, the HTTP/SSE front, and the
/// `merge` adapter's member reads): the operations of the socket protocol (SPEC §5), for clients
/// the front connects.
///
/// A front gives each client an id from ``connect()``; the client object (a ``ClientHandle``:
/// that id, and the ``ClientSink`` its events go to) is passed to every call, and ends with
/// ``disconnect(_:)``. Each operation answers through its
/// `answer` closure, on the main actor: a result, or a ``ServiceError`` whose ``ServiceError/Code``
/// is the protocol's (`unknown_feed`, `bad_request`, `store_failed`, `shutting_down`,
/// `too_many_consumers`). Everything
/// else a client is told comes as ``ClientEvent``s to its sink: pages, `end`, `refreshed`,
/// upstream notices, and the end of a subscription it did not ask for (a reload removed the
/// feed; another client took its consumer over).
///
/// ```swift
/// let client = Client(id: service.connect())      // the front's ClientHandle
/// service.subscribe(client, to: "users", consumer: "indexer") { result in … }   // Subscribed, or store_failed
/// service.next(client, feed: "users", count: 2) { result in … }               // then 2 × .page, or .end
/// service.acknowledge(client, feed: "users", through: 2) { result in … }      // the cursor, once durable
/// service.disconnect(client)
/// ```
///
/// Rules a front can rely on:
/// - A subscription is the client's reading of one feed: subscribing again replaces it;
///   `next` subscribes anonymously when the client has none (its answer then carries the
///   ``Subscribed`` the front announces), and its answer comes before the pages it asked for.
/// - Pages reach a client in order, each once per generation, with no gap; a consumer's cursor
///   moves only once durable (for a consumer, `next` first acknowledges what it was sent, and if
///   that fails answers `store_failed` and sends nothing).
/// - Flow control: the engine hands a sink pages only while it ``ClientSink/canTakePage``; once
///   it can again, the front calls ``resume(_:)``.
/// - Nothing blocks: durable writes happen off the main actor, and the answer comes when done.
@MainActor
public final class FeedService {
    /// What one client may hold.
    public struct Limits: Sendable {
        /// Subscriptions one client may hold at once (`daemon.max_subscriptions`).
        public var subscriptionsPerClient: Int

        /// Limits with `subscriptionsPerClient` subscriptions per client.
        public init(subscriptionsPerClient: Int) {
            self.subscriptionsPerClient = subscriptionsPerClient
        }
    }

    private let directory: FeedDirectory
    private let logger: Logger
    /// The limits, which a reload may change.
    public var limits: Limits
    private var lastClient = 0
    /// Set once the daemon stops: every operation then answers `shutting_down`.
    public private(set) var isShuttingDown = false

    /// A service over the feeds of `directory`.
    public init(directory: FeedDirectory, limits: Limits, logger: Logger) {
        self.directory = directory
        self.limits = limits
        self.logger = logger
    }

    /// The configured feeds, sorted (what `hello` lists).
    public var feedNames: [String] { directory.names }

    // MARK: Clients

    /// The id of a new client, which the front's ``ClientHandle`` keeps.
    public func connect() -> ClientID {
        lastClient += 1
        return ClientID(value: lastClient)
    }

    /// Ends every subscription of `client`; what it asked for and was not answered is dropped.
    public func disconnect(_ client: any ClientHandle) {
        for feed in directory.feeds.values { feed.handle(.unsubscribe(client.clientID)) }
    }

    /// `client` can take pages again (its sink's ``ClientSink/canTakePage`` turned true).
    public func resume(_ client: any ClientHandle) {
        for feed in directory.feeds.values { feed.handle(.resume(client.clientID)) }
    }

    /// Whether a `next` of `client` still waits for pages or `end` (a front that half-closed waits for those).
    public func hasPendingRequests(_ client: any ClientHandle) -> Bool {
        directory.feeds.values.contains { $0.subscriptions[client.clientID]?.hasPendingRequests == true }
    }

    /// The feeds `client` reads, sorted.
    public func subscriptions(of client: any ClientHandle) -> [String] {
        directory.feeds.values.filter { $0.subscriptions[client.clientID] != nil }.map(\.name).sorted()
    }

    /// From now on every operation answers `shutting_down`.
    public func beginShutdown() {
        isShuttingDown = true
    }

    // MARK: The protocol's operations

    /// Starts reading `feed` (SPEC §5 `subscribe`): a `consumer` resumes after its stored cursor
    /// (the fleet's, for a shared feed) unless `after` is given, which is then stored; anyone
    /// else starts after `after`, or 0. With `inGeneration`, `after` counts only in that
    /// generation, and the client starts after 0 of the current one if it is another (an event
    /// stream resuming from `Last-Event-ID`). With `follow`, pages are pushed as they are ready.
    /// A consumer read by another client (here, or on another instance of the fleet) is taken
    /// over. Answers once the start is durable.
    public func subscribe(
        _ client: any ClientHandle, to feedName: String, consumer: String? = nil, after: Int? = nil, inGeneration: Int? = nil,
        follow: Bool = false, answer: @escaping (Result<Subscribed, ServiceError>) -> Void
    ) {
        guard let feed = running(feedName, answer: answer) else { return }
        let others = directory.feeds.values.count { $0 !== feed && $0.subscriptions[client.clientID] != nil }
        guard others < limits.subscriptionsPerClient else {
            let message = "a connection may hold at most \(limits.subscriptionsPerClient) subscriptions; unsubscribe first"
            return answer(.failure(ServiceError(.badRequest, message, feed: feedName)))
        }
        let after = inGeneration.map { $0 == feed.generation ? after : 0 } ?? after
        feed.handle(.subscribe(client, consumer: consumer, after: after, follows: follow, answer: answer))
    }

    /// Asks for the next `count` pages of `feed` (SPEC §5 `next`), first acknowledging every page
    /// delivered before. Subscribes anonymously if `client` reads no such feed: the answer then
    /// carries that ``Subscribed``. The answer comes before the pages, which follow as events
    /// tagged `replyTo` (fewer, then `end`, past the feed's last page).
    public func next(
        _ client: any ClientHandle, feed feedName: String, count: Int = 1, replyTo: ReplyTag? = nil,
        answer: @escaping (Result<Subscribed?, ServiceError>) -> Void
    ) {
        guard let feed = running(feedName, answer: answer) else { return }
        guard feed.subscriptions[client.clientID] == nil else {
            return feed.handle(.next(client.clientID, count: count, replyTo: replyTo, subscribed: nil, answer: answer))
        }
        subscribe(client, to: feedName) { result in
            switch result {
            case .success(let subscribed):
                feed.handle(.next(client.clientID, count: count, replyTo: replyTo, subscribed: subscribed, answer: answer))
            case .failure(let error):
                answer(.failure(error))
            }
        }
    }

    /// Marks the pages of `feed` up to `page` consumed (SPEC §5 `ack`), never beyond what was
    /// delivered; answers the cursor once durable (for a consumer).
    public func acknowledge(_ client: any ClientHandle, feed feedName: String, through page: Int, answer: @escaping (Result<Int, ServiceError>) -> Void) {
        guard let feed = running(feedName, answer: answer) else { return }
        guard feed.subscriptions[client.clientID] != nil else {
            return answer(.failure(ServiceError(.badRequest, "not subscribed to \"\(feedName)\"; subscribe or next first", feed: feedName)))
        }
        feed.handle(.acknowledge(client.clientID, page: page, answer: answer))
    }

    /// Stops `client`'s reading of `feed` (SPEC §5 `unsubscribe`); its unanswered `next`s are dropped.
    public func unsubscribe(_ client: any ClientHandle, from feedName: String, answer: @escaping (Result<Void, ServiceError>) -> Void) {
        guard let feed = running(feedName, answer: answer) else { return }
        feed.handle(.unsubscribe(client.clientID))
        answer(.success(()))
    }

    /// The answer to ``refresh(_:by:replyTo:answer:)``.
    public struct Refreshed: Sendable, Equatable {
        /// The feed's generation now.
        public let generation: Int
        /// Whether the requester reads the feed, and so was told with its own `refreshed` event,
        /// tagged with the request's `replyTo`; if not, the front answers it with this.
        public let requesterWasTold: Bool
    }

    /// Starts a new generation of `feed` (SPEC §5 `refresh`; a `merge` feed refreshes its members
    /// too): every subscriber, here and on every instance of the fleet, gets `refreshed` and goes
    /// back to page 0. Answers once the new generation is durable.
    public func refresh(_ feedName: String, by client: (any ClientHandle)? = nil, replyTo: ReplyTag? = nil, answer: @escaping (Result<Refreshed, ServiceError>) -> Void) {
        guard running(feedName, answer: answer) != nil else { return }
        directory.refresh(feedName, requester: client?.clientID, replyTo: replyTo) { [directory] result in
            switch result {
            case .success(let generation):
                let told = client.flatMap { directory[feedName]?.subscriptions[$0.clientID] }.map { !$0.isStarting } ?? false
                answer(.success(Refreshed(generation: generation, requesterWasTold: told)))
            case .failure(let error):
                answer(.failure(.storeFailed("the new generation could not be stored", error, feed: feedName)))
            }
        }
    }

    /// Deletes consumer `consumer`'s cursor of `feed` (SPEC §5 `forget`), in the fleet too for a
    /// shared feed; works for a feed no longer configured. Answers once durable.
    public func forget(_ consumer: String, of feedName: String, answer: @escaping (Result<Void, ServiceError>) -> Void) {
        guard !isShuttingDown else { return answer(.failure(Self.stopping)) }
        guard directory.store != nil || directory[feedName]?.membership.isShared == true else {
            return answer(.failure(ServiceError(.badRequest, "this daemon keeps no consumer state", feed: feedName)))
        }
        Task {
            do throws(StoreError) {
                guard try await directory.forget(consumer, of: feedName) else {
                    return answer(.failure(ServiceError(.badRequest, "feed \"\(feedName)\" has no consumer \"\(consumer)\"", feed: feedName)))
                }
            } catch {
                return answer(.failure(.storeFailed("the consumer could not be forgotten", error, feed: feedName)))
            }
            logger.forFeed(feedName).notice("consumer \(consumer) forgotten")
            answer(.success(()))
        }
    }

    /// `feed`'s durable consumers by name (SPEC §5 `consumers`): at most `limit` (1 to
    /// ``ConsumerPage/maximumCount``) whose names sort after `after`, and the name to ask for the next
    /// page after, nil on the last.
    public func consumers(of feedName: String, after: String?, limit: Int, answer: (Result<ConsumerPage, ServiceError>) -> Void) {
        guard let feed = running(feedName, answer: answer) else { return }
        answer(.success(feed.consumerRoster(listing: min(max(limit, 1), ConsumerPage.maximumCount), after: after).first))
    }

    /// Each feed's consumers with the pages each is behind, by feed and then consumer name (the
    /// metrics' `feedd_consumer_lag_pages`, one series per consumer).
    public func consumerLags() -> [(feed: String, consumers: [(name: String, behind: Int)])] {
        directory.names.compactMap { name in directory[name].map { (name, $0.consumerLags()) } }
    }

    // MARK: Figures

    /// Each feed's entry of `status` (SPEC §5), sorted by name, with as much of its consumers as
    /// `detail` says (the metrics need their lag only, systemd's STATUS line nothing of them).
    public func feedStatuses(consumers detail: FeedStatus.ConsumerDetail = .listed) -> [FeedStatus] {
        directory.names.compactMap { name in directory[name].map { status($0, consumers: detail) } }
    }

    /// The generation `feed` serves now; nil if no such feed runs.
    public func generation(of feed: String) -> Int? { directory[feed]?.generation }

    /// `feed`'s entry of `status`, if it runs.
    public func status(of feed: String) -> FeedStatus? { directory[feed].map { status($0) } }

    /// `feed`'s figures, with the members it gathers, whose outages its health reports.
    private func status(_ feed: Feed, consumers detail: FeedStatus.ConsumerDetail = .listed) -> FeedStatus {
        FeedStatus(feed, members: feed.memberFeeds.compactMap { directory[$0] }, consumers: detail)
    }

    /// The fleet's part of `status`, for a daemon with `[cluster]`.
    public var cluster: ClusterStatus? {
        directory.clusterName.map { name in
            ClusterStatus(name: name, connected: directory.fleet?.isConnected == true, feeds: directory.names.compactMap { feedName in
                directory[feedName]?.fleetState.map { (feedName, $0) }
            }, statistics: fleetStatistics)
        }
    }

    /// The fleet link's figures, for the metrics and `status`; nil without `[cluster]`.
    public var fleetStatistics: FleetStatistics? { directory.fleet?.statistics }

    // MARK: Helpers

    private static let stopping = ServiceError(.shuttingDown, "feedd is shutting down")

    /// The running feed `name`; else answers why not and returns nil.
    private func running<Value>(_ name: String, answer: (Result<Value, ServiceError>) -> Void) -> Feed? {
        guard !isShuttingDown else {
            answer(.failure(Self.stopping))
            return nil
        }
        guard let feed = directory[name] else {
            answer(.failure(ServiceError(.unknownFeed, "no feed named \"\(name)\" (feeds: \(directory.names.joined(separator: ", ")))", feed: name)))
            return nil
        }
        return feed
    }
}
