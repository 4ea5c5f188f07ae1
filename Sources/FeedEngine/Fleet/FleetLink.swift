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
    /// page another instance published; else, holding the page's lease, `fetch` (nil: the source
    /// has nothing there yet), published for the others; else the holder's publication, waited
    /// for until its lease runs out, then the lease tried again. Returns `.unreachable` without
    /// calling `fetch` when the fleet cannot be reached: the caller fetches on its own. Throws
    /// only what `fetch` threw. Cancelling the task ends the wait.
    func obtainPage(
        feed: String, generation: Int, page: Int, fetch: @escaping @Sendable () async throws -> FleetPage?
    ) async throws -> FleetPageOutcome
    /// Returns once a polled source may have page `page` (past its newest): `wait` (the
    /// adapter's wait for new data) runs on one instance of the fleet at a time; the others
    /// return as soon as that page is published, or take their turn when the looker's lease
    /// runs out. `wait` runs here alone when the fleet cannot be reached. Cancelling the task
    /// ends the wait.
    func awaitNewPage(feed: String, generation: Int, page: Int, wait: @escaping @Sendable () async throws -> Void) async throws
    /// Every page of `feed` published from now on by any instance, while connected.
    func publishedPages(of feed: String) -> AsyncStream<FleetPage>

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
    public let feed: String
    public let number: Int
    public let seed: String
    /// ``FeedSettings/contentFingerprint`` of the instance that started it.
    public let fingerprint: String

    public init(feed: String, number: Int, seed: String, fingerprint: String) {
        self.feed = feed
        self.number = number
        self.seed = seed
        self.fingerprint = fingerprint
    }
}

/// A consumer's fleet-wide cursor: the last page it acknowledged, in which generation.
public struct FleetCursor: Sendable, Equatable {
    public let generation: Int
    public let page: Int

    public init(generation: Int, page: Int) {
        self.generation = generation
        self.page = page
    }
}

/// A page as one instance of the fleet published it: its line, and what the source said about
/// the pages after it, so every instance pages on from it as if it had fetched it.
public struct FleetPage: Sendable {
    public let feed: String
    public let generation: Int
    public let number: Int
    /// The exact line a subscriber is sent for the page when it is pushed, newline included.
    public let line: [UInt8]
    public let itemCount: Int
    public let next: NextPage
    /// The source's page the page was asked for as (it differs from `number` on a `wrap` feed).
    public let sourcePage: Int

    public init(feed: String, generation: Int, number: Int, line: [UInt8], itemCount: Int, next: NextPage, sourcePage: Int) {
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
    /// `fetchedHere`: this instance fetched it from the upstream (else another one had).
    case page(FleetPage, fetchedHere: Bool)
    /// The instance that fetched it found nothing there yet (a live source at its newest page).
    case notYet
    /// The fleet cannot be reached; nothing was fetched.
    case unreachable
}

/// Why the fleet could not do something (mostly: it cannot be reached).
public struct FleetError: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
