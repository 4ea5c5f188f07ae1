import FeedKit

/// What the engine needs of a fleet (SPEC §8), so it need not know how the fleet keeps its
/// shared state: FeedFleet implements it on NATS JetStream.
///
/// The engine calls it from the main actor and never waits on it there: every call is `async`
/// and runs elsewhere, and each one fails at once with ``FleetError`` while the fleet cannot
/// be reached, so a shared feed degrades to a local one instead of stalling.
public protocol FleetLink: AnyObject, Sendable {
    /// The fleet's `name`: instances with the same one share their shared feeds.
    var name: String { get }
    /// Whether the fleet can be reached now.
    var isConnected: Bool { get }
    /// Whether the fleet can be reached, now and at every change.
    func connectionChanges() -> AsyncStream<Bool>

    /// The fleet's current generation of `feed`; if it has none, `generation` with `seed` (the
    /// one this instance serves) becomes the fleet's.
    func join(feed: String, fingerprint: String, generation: Int, seed: String) async throws(FleetError) -> FleetGeneration
    /// Starts the generation after `generation` of `feed`; returns the new one, which may be
    /// another instance's concurrent refresh.
    func refresh(feed: String, replacing generation: Int, seed: String, fingerprint: String) async throws(FleetError) -> FleetGeneration
    /// Every feed's current generation, then every new one, as long as the link is open; again
    /// after each reconnection.
    func generations() -> AsyncStream<FleetGeneration>

    /// Page `page` of generation `generation` of `feed`, fetched once for the whole fleet: the
    /// page the fleet already has; else, holding the page's lease, `fetch` (nil: the source has
    /// nothing there yet), published for the others (if another instance published the address
    /// first, its page is the answer: the first page published for an address is the page);
    /// else `.heldElsewhere`, when another instance holds the lease: its publication comes
    /// through ``publications()``, and the engine asks again after `retryIn` at the latest.
    /// Returns `.unreachable` without calling `fetch` when the fleet cannot be reached. Throws
    /// only what `fetch` threw.
    func obtainPage(
        feed: String, generation: Int, page: Int, fetch: @escaping @Sendable () async throws -> FleetPage?
    ) async throws -> FleetPageOutcome
    /// Returns once a polled source may have page `page` (past its newest), by running `wait`
    /// (the adapter's wait for new data) while holding the page's look lease, so one instance of
    /// the fleet looks at a time; `.heldElsewhere` at once when another instance holds it (the
    /// page it may publish comes through ``publications()``). `wait` runs here alone when the
    /// fleet cannot be reached. Cancelling the task ends the wait.
    func awaitNewPage(feed: String, generation: Int, page: Int, wait: @escaping @Sendable () async throws -> Void) async throws -> FleetLookOutcome
    /// Every page any instance publishes, of every feed, from now on, while connected: the one
    /// way publications reach the engine. Each is decoded once, its line shared.
    func publications() -> AsyncStream<FleetPage>

    /// Makes this instance the one that serves `consumer` of `feed` (another one drops it).
    func claimConsumer(feed: String, consumer: String) async throws(FleetError)
    /// The position `consumer` acknowledged last, anywhere in the fleet.
    func cursor(feed: String, consumer: String) async throws(FleetError) -> FleetCursor?
    /// Moves the cursor forward (never back); durable in the fleet when this returns.
    func advanceCursor(feed: String, consumer: String, to cursor: FleetCursor) async throws(FleetError)
    /// Forgets `consumer`'s cursor of `feed`.
    func forgetCursor(feed: String, consumer: String) async throws(FleetError)
    /// Every consumer claimed by another instance, from now on (and again after a reconnection).
    func claimsElsewhere() -> AsyncStream<(feed: String, consumer: String)>

    /// What the link has seen and done since it started, for the metrics and `status`.
    var statistics: FleetStatistics { get }
}

extension FleetLink {
    /// A link that keeps no figures reports only whether it is connected.
    public var statistics: FleetStatistics { FleetStatistics(isConnected: isConnected) }
}

/// A fleet link's figures: its connection, the records it refused to believe, and how long the
/// fleet took to answer. Counts only grow while the daemon runs.
public struct FleetStatistics: Sendable, Equatable {
    /// Whether the fleet can be reached now.
    public var isConnected: Bool
    /// The server the link is connected to (its URL without credentials), if any.
    public var server: String?
    /// How many times the connection was made again after it was lost.
    public var reconnections = 0
    /// Records read from the fleet and rejected, by reason (`page`, `mac`, `lease`, …; every
    /// reason the link knows is present, at 0 if none was rejected).
    public var rejected: [String: Int] = [:]
    /// Publications of a page the stream refused because the address already held one.
    public var refusedPublications = 0
    /// How long publishing a page to the fleet took, until the stream confirmed it.
    public var publishDuration = DurationHistogram()
    /// How long acquiring a page's lease took, whatever the answer.
    public var leaseDuration = DurationHistogram()
    /// The last refusal or failure an operator must act on (credentials, TLS, permissions, a
    /// full JetStream), until the fleet works again; nil while all is well.
    public var problem: String?

    /// Figures of a link that has seen nothing yet, connected or not.
    public init(isConnected: Bool) {
        self.isConnected = isConnected
    }

    /// What `status`'s `cluster` object says of the link besides its state: `server`,
    /// `reconnects`, `rejected` (all reasons together) and `problem` (null while all is well).
    public var statusFields: [String: JSONValue] {
        [
            "server": server.map(JSONValue.string) ?? .null, "reconnects": .integer(Int64(reconnections)),
            "rejected": .integer(Int64(rejected.values.reduce(0, +))), "problem": problem.map(JSONValue.string) ?? .null,
        ]
    }
}

/// A generation as the fleet agreed on it.
public struct FleetGeneration: Sendable, Equatable {
    /// The feed it is a generation of.
    public let feed: String
    /// Its number, within 1...2^40.
    public let number: Int
    /// Its ``PageRequest/seed``.
    public let seed: String
    /// ``FeedSettings/contentFingerprint`` of the instance that started it.
    public let fingerprint: String

    /// The generation `number` of `feed`.
    public init(feed: String, number: Int, seed: String, fingerprint: String) {
        self.feed = feed
        self.number = number
        self.seed = seed
        self.fingerprint = fingerprint
    }
}

/// A consumer's fleet-wide cursor: the last page it acknowledged, in which generation.
public struct FleetCursor: Sendable, Equatable {
    /// The generation it counts in.
    public let generation: Int
    /// The last page acknowledged there.
    public let page: Int

    /// A cursor after `page` of `generation`.
    public init(generation: Int, page: Int) {
        self.generation = generation
        self.page = page
    }
}

/// A page as one instance of the fleet published it: its line, and what the source said about
/// the pages after it, so every instance pages on from it as if it had fetched it.
public struct FleetPage: Sendable {
    /// The feed, generation and page number it is published at.
    public let feed: String
    public let generation: Int
    public let number: Int
    /// The exact line a subscriber is sent for the page when it is pushed, newline included.
    public let line: SharedBytes
    /// How many items its line holds.
    public let itemCount: Int
    /// What the source said of the page after it.
    public let next: NextPage
    /// The source's page the page was asked for as (it differs from `number` on a `wrap` feed).
    public let sourcePage: Int

    /// A page as published, its line shared.
    public init(feed: String, generation: Int, number: Int, line: SharedBytes, itemCount: Int, next: NextPage, sourcePage: Int) {
        self.feed = feed
        self.generation = generation
        self.number = number
        self.line = line
        self.itemCount = itemCount
        self.next = next
        self.sourcePage = sourcePage
    }
}

/// What ``FleetLink/obtainPage(feed:generation:page:fetch:)`` came back with.
public enum FleetPageOutcome: Sendable {
    /// The fleet's page. `fetchedHere`: this instance fetched it from the upstream (else another
    /// one had).
    case page(FleetPage, fetchedHere: Bool)
    /// This instance fetched it and found nothing there yet (a live source at its newest page).
    case notYet
    /// Another instance holds the page's lease and is fetching it: its publication comes through
    /// ``FleetLink/publications()``; ask again after `retryIn` if it has not come by then.
    case heldElsewhere(retryIn: Duration)
    /// The fleet cannot be reached; nothing was fetched.
    case unreachable
}

/// What ``FleetLink/awaitNewPage(feed:generation:page:wait:)`` came back with.
public enum FleetLookOutcome: Sendable {
    /// The source may have the page now (this instance looked, or the page was published).
    case mayHaveMore
    /// Another instance is looking: what it finds comes through ``FleetLink/publications()``; ask
    /// again after `retryIn` if nothing has come by then.
    case heldElsewhere(retryIn: Duration)
}

/// Why the fleet could not do something (mostly: it cannot be reached).
public struct FleetError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, for the log and the client.
    public let description: String

    /// An error saying `description`.
    public init(_ description: String) {
        self.description = description
    }
}
