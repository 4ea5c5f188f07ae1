import FeedKit
import Foundation

// # How a fleet keeps its shared state in JetStream (SPEC §8)
//
// Everything is named after the cluster `name` (N below) so fleets can share one NATS cluster.
// Every stream and bucket uses file storage and `replicas` copies.
//
// | what        | where                                   | key / subject                         | value                                          |
// |-------------|-----------------------------------------|---------------------------------------|------------------------------------------------|
// | pages       | stream `feedd-N-pages`                  | `feedd.N.pages.<feed>.<gen>.<page>`   | the exact page line                            |
// | leases      | bucket `feedd-N-leases`                 | `<feed>.<gen>.<page>` (`.look`)       | `{"holder":"<instance>","expires_ms":<unix ms>}`|
// | generations | bucket `feedd-N-generations`            | `<feed>`                              | `{"generation":G,"seed":"…","fingerprint":"…"}` |
// | cursors     | bucket `feedd-N-cursors`                | `<feed>.<consumer, escaped>`          | `{"generation":G,"page":P}`                    |
// | consumers   | bucket `feedd-N-consumers`              | `<feed>.<consumer, escaped>`          | `{"feed":…,"consumer":…,"instance":…}`         |
//
// Pages stream: subjects `feedd.N.pages.>`, at most one message per subject, duplicate window
// two minutes, direct gets allowed (any replica answers a read). A page is published with its
// address as message id *and* "expect no message on this subject yet", so the first page
// stored for an address is the only one, for good, not only within the duplicate window.
//
// Leases: the expiry lives in the value and every change is a compare-and-set on the key's
// revision. Acquire = create (only if the key has no value). If it has one that expired (or
// was released, `expires_ms` 0), take it over = update expecting the revision just read: of
// several instances taking over at once exactly one wins. Renew and release are updates
// expecting the holder's own revision, so an instance whose lease was taken over can neither
// extend nor cancel its successor's. Why not a bucket MaxAge as the lease itself (per-key TTL
// needs nats-server 2.11; Debian has 2.9): the lease length would be fixed by whichever
// instance created the bucket, expiry would be a deletion that no one can tell from a release,
// and a late release by a dead holder's `delete` could not be made conditional. The buckets'
// MaxAge (an hour, or 4 leases if longer) only sweeps away old leases. The cost: expiry is
// compared with each host's clock, so hosts need NTP; a skew of s moves a takeover by s.
//
// A polled source's looks (is there a page past the last one yet?) take a lease of their own,
// the page's key plus `.look`: one instance looks at a time, the others wait for its
// publication, and the fetch that follows a look takes the page's lease as any fetch does.
//
// Pages are published with a `Feedd-Page` header saying how to page on from them (see
// FeedFleet's ClusterFleetLink); `publishedPage(_:)` and `pages(of:)` hand it back.
//
// A consumer is served by one instance at a time: subscribing claims it (a plain put; the
// last claim in the bucket's order wins), and every instance watches the claims and drops its
// own subscriber of a consumer claimed by another (`unsubscribed`, reason `takeover`).
//
// Cursors never go back: an advance reads the stored cursor, keeps it if it is already at or
// past the new position (generation first, then page), and otherwise writes expecting the
// revision it read, retrying when another instance wrote in between.
//
// What the engine calls, and when:
// - at start: `ClusterStore.connect` (never fails for an unreachable cluster), then watch
//   `states()` for status and `generations()` for refreshes made anywhere (both keep working
//   across outages and while the cluster has not been reached yet);
// - joining a shared feed: `generation(of:)`; if none, `startGeneration(of:replacing:nil,…)`;
//   a different fingerprint means the definitions differ: serve that feed alone;
// - `refresh`: `startGeneration(of:replacing:current,…)`; its result (maybe another instance's
//   concurrent refresh) is the new generation; `forgetPages(of:generation:)` drops the old
//   generation's pages once its readers moved on (the stream keeps every page until then);
// - a page is needed: `page(_:)`; if absent, `acquireLease(_:)`. Acquired: fetch upstream,
//   `renewLease` every lease/3 while fetching, `publishPage`, `releaseLease`. Held elsewhere:
//   wait for it on `pages(of:)` (followers use the same stream), and try `acquireLease` again
//   once `until` has passed;
// - ack / implicit ack: `advanceCursor`; subscribe as a consumer: `claimConsumer`, then
//   `cursor`; forget: `forgetCursor`; at start, watch `consumerClaims()` for takeovers;
// - after `states()` says `.connected` again: re-read `page(_:)` for pages awaited meanwhile
//   (core subscriptions miss what was published during the outage); `generations()` replays
//   the latest generations by itself.

/// A fleet's shared leases, generations, cursors and pages, kept in NATS JetStream.
///
/// Every call fails fast with ``NATSError/Code/unavailable`` while the cluster cannot be reached,
/// and never runs libnats on the caller's thread (see ``NATSClient``).
public final class ClusterStore: Sendable {
    /// The `[cluster]` settings the store needs.
    public struct Configuration: Sendable {
        /// `nats://` or `tls://` URLs of any servers of the cluster.
        public var servers: [String]
        /// Instances with the same name share their shared feeds.
        public var name: String
        /// JetStream replicas of every stream and bucket.
        public var replicas: Int
        /// How long a fetch lease lasts unless renewed.
        public var lease: Duration
        /// This instance's name in leases; unique per running process.
        public var instance: String
        public var credentialsFile: String?
        public var trustedCertificatesFile: String?
        /// The longest one call waits for the cluster.
        public var requestTimeout: Duration = .seconds(2)
        /// How often an idle connection is pinged; two unanswered pings mean disconnected.
        public var pingInterval: Duration = .seconds(2)

        public init(servers: [String], name: String, replicas: Int, lease: Duration, instance: String) {
            self.servers = servers
            self.name = name
            self.replicas = replicas
            self.lease = lease
            self.instance = instance
        }
    }

    /// The streams and buckets, opened on first use (the cluster may be unreachable at start).
    private struct Resources: Sendable {
        let leases: KeyValueBucket
        let generations: KeyValueBucket
        let cursors: KeyValueBucket
        let consumers: KeyValueBucket
    }

    public let configuration: Configuration
    public let client: NATSClient
    private let resources = Locked<Resources?>(nil)
    private let pageStream: String
    private let pageSubjectPrefix: String

    private init(configuration: Configuration, client: NATSClient) {
        self.configuration = configuration
        self.client = client
        pageStream = "feedd-\(configuration.name)-pages"
        pageSubjectPrefix = "feedd.\(configuration.name).pages"
    }

    /// Connects to the cluster; an unreachable one is retried in the background, not an error.
    public static func connect(_ configuration: Configuration) async throws(NATSError) -> ClusterStore {
        var options = NATSClient.Options(servers: configuration.servers, name: "feedd \(configuration.instance)")
        options.credentialsFile = configuration.credentialsFile
        options.trustedCertificatesFile = configuration.trustedCertificatesFile
        options.requestTimeout = configuration.requestTimeout
        options.pingInterval = configuration.pingInterval
        return ClusterStore(configuration: configuration, client: try await NATSClient.connect(options))
    }

    /// Whether the cluster can be reached now.
    public var state: ConnectionState { client.state }

    /// The connection state now, then every change.
    public func states() -> AsyncStream<ConnectionState> { client.states() }

    /// The URL of the server this instance is connected to, or nil while disconnected.
    public func connectedServer() async -> String? { await client.connectedServer() }

    /// Ends every stream of this store and closes the connection.
    public func close() async { await client.close() }

    private func opened() async throws(NATSError) -> Resources {
        if let resources = resources.withLock({ $0 }) { return resources }
        let name = configuration.name
        let replicas = configuration.replicas
        try await client.addStream(
            StreamConfiguration(
                name: pageStream, subjects: ["\(pageSubjectPrefix).>"], replicas: replicas, maxMessagesPerSubject: 1,
                duplicateWindow: .seconds(120)))
        let leaseSweep = max(configuration.lease * 4, .seconds(3_600))
        let opened = Resources(
            leases: try await client.keyValueBucket(BucketConfiguration(name: "feedd-\(name)-leases", replicas: replicas, maxAge: leaseSweep)),
            generations: try await client.keyValueBucket(BucketConfiguration(name: "feedd-\(name)-generations", replicas: replicas)),
            cursors: try await client.keyValueBucket(BucketConfiguration(name: "feedd-\(name)-cursors", replicas: replicas)),
            consumers: try await client.keyValueBucket(BucketConfiguration(name: "feedd-\(name)-consumers", replicas: replicas)))
        return resources.withLock { resources in
            if resources == nil { resources = opened }
            return resources!
        }
    }

    // MARK: Fetch leases

    /// Tries to become the one instance that fetches `page` (or, for `.look`, that looks
    /// whether a polled source has it yet).
    public func acquireLease(_ page: PageAddress, for purpose: LeasePurpose = .fetch) async throws(NATSError) -> LeaseOutcome {
        let leases = try await opened().leases
        let key = FeedLease.key(of: page, for: purpose)
        // Each round either wins or learns a newer revision; a few rounds cover any realistic race.
        for _ in 0..<4 {
            let lease = FeedLease(
                page: page, purpose: purpose, holder: configuration.instance, expires: Self.now + configuration.lease.milliseconds, revision: 0)
            do {
                return .acquired(lease.with(revision: try await leases.create(key, value: lease.value)))
            } catch where error.code == .conflict {}
            guard let entry = try await leases.entry(key) else { continue }
            let current = FeedLease(page: page, purpose: purpose, entry: entry)
            if let current, current.holder != configuration.instance, current.expires > Self.now {
                return .heldElsewhere(holder: current.holder, untilUnixMilliseconds: current.expires)
            }
            do {
                return .acquired(lease.with(revision: try await leases.update(key, to: lease.value, expecting: entry.revision)))
            } catch where error.code == .conflict {}
        }
        throw NATSError(.conflict, operation: "acquire lease \"\(key)\"", reason: "the lease kept changing hands")
    }

    /// Extends `lease` by the configured length from now. Throws ``NATSError/Code/conflict`` if
    /// it expired and another instance took it over: stop fetching, that one will publish.
    public func renewLease(_ lease: FeedLease) async throws(NATSError) -> FeedLease {
        let renewed = lease.until(Self.now + configuration.lease.milliseconds)
        let revision = try await opened().leases.update(lease.key, to: renewed.value, expecting: lease.revision)
        return renewed.with(revision: revision)
    }

    /// Gives `lease` up so another instance may take it at once; a no-op if it was taken over.
    public func releaseLease(_ lease: FeedLease) async throws(NATSError) {
        do {
            _ = try await opened().leases.update(lease.key, to: lease.until(0).value, expecting: lease.revision)
        } catch where error.code == .conflict {}
    }

    // MARK: Generations

    /// The fleet's current generation of `feed`, if any instance started one.
    public func generation(of feed: String) async throws(NATSError) -> FeedGeneration? {
        try await opened().generations.entry(feed).flatMap(FeedGeneration.init(entry:))
    }

    /// Starts the generation after `current` (or the first, numbered `firstNumber`, if nil) with
    /// `seed`. If another instance started one first (a concurrent refresh, or a join), returns
    /// that one instead. The first instance to join a feed numbers the fleet's first generation
    /// after the one it was serving, so its subscribers never see the number go back.
    public func startGeneration(
        of feed: String, replacing current: FeedGeneration?, seed: String, fingerprint: String, firstNumber: Int = 1
    ) async throws(NATSError) -> FeedGeneration {
        let generations = try await opened().generations
        let number = current.map { $0.generation + 1 } ?? firstNumber
        let next = FeedGeneration(feed: feed, generation: number, seed: seed, fingerprint: fingerprint, revision: 0)
        do {
            let revision =
                if let current {
                    try await generations.update(feed, to: next.value, expecting: current.revision)
                } else {
                    try await generations.create(feed, value: next.value)
                }
            return next.with(revision: revision)
        } catch where error.code == .conflict {
            if let winner = try await generation(of: feed) { return winner }
            throw error
        }
    }

    /// Every feed's current generation, then every new one, from any instance, until the store
    /// is closed. Works across outages: the current generations come again after each
    /// reconnection, and an instance that started without the cluster gets them once it joins.
    public func generations() -> AsyncStream<FeedGeneration> {
        watchForever(\.generations, decode: FeedGeneration.init(entry:))
    }

    /// Watches every key of a bucket for as long as the store is open, opening the bucket when
    /// the cluster can be reached (maybe only later) and again after each reconnection.
    private func watchForever<Element: Sendable>(
        _ bucket: KeyPath<Resources, KeyValueBucket> & Sendable, decode: @escaping @Sendable (KeyValueBucket.Entry) -> Element?
    ) -> AsyncStream<Element> {
        let (elements, continuation) = AsyncStream.makeStream(of: Element.self)
        let forwarding = Task {
            defer { continuation.finish() }
            while !Task.isCancelled {
                let entries: AsyncStream<KeyValueBucket.Entry>
                do {
                    entries = try await opened()[keyPath: bucket].watch(">")
                } catch {
                    // The bucket can only be opened once the cluster is reachable and has a leader.
                    guard await client.isConnected(after: .milliseconds(250)) else { return }
                    continue
                }
                for await entry in entries {
                    if let element = decode(entry) { continuation.yield(element) }
                }
                return
            }
        }
        continuation.onTermination = { _ in forwarding.cancel() }
        return elements
    }

    // MARK: Consumers

    /// Makes this instance the one that serves `consumer` of `feed`; the instance that served it
    /// until now learns of it from ``consumerClaims()``.
    public func claimConsumer(feed: String, consumer: String) async throws(NATSError) {
        let claim = ConsumerClaim(feed: feed, consumer: consumer, instance: configuration.instance)
        _ = try await opened().consumers.put(Self.consumerKey(feed: feed, consumer: consumer), value: claim.value)
    }

    /// Every consumer's latest claim, then every new one, from any instance; like
    /// ``generations()`` it keeps working across outages and repeats the latest claims after one.
    public func consumerClaims() -> AsyncStream<ConsumerClaim> {
        watchForever(\.consumers, decode: ConsumerClaim.init(entry:))
    }

    // MARK: Cursors

    /// The position `consumer` of `feed` acknowledged last, anywhere in the fleet.
    public func cursor(feed: String, consumer: String) async throws(NATSError) -> CursorPosition? {
        try await opened().cursors.entry(Self.consumerKey(feed: feed, consumer: consumer)).flatMap(CursorPosition.init(entry:))
    }

    /// Moves the cursor to `position` unless it is already there or further; returns the stored
    /// cursor. Durable in the cluster when this returns.
    public func advanceCursor(feed: String, consumer: String, to position: CursorPosition) async throws(NATSError) -> CursorPosition {
        let cursors = try await opened().cursors
        let key = Self.consumerKey(feed: feed, consumer: consumer)
        for attempt in 0..<8 {
            if attempt > 0 {
                // Each lost race means another instance moved the cursor meanwhile. Racing it again
                // at once can lose to it eight times in a row (seen under the thread sanitizer);
                // waiting 1, 2, 4 … ms lets it get ahead, past this position if it is going there.
                try? await Task.sleep(for: .milliseconds(1 << (attempt - 1)))
            }
            let entry = try await cursors.entry(key)
            if let entry, let stored = CursorPosition(entry: entry), stored >= position { return stored }
            do {
                if let entry {
                    _ = try await cursors.update(key, to: position.value, expecting: entry.revision)
                } else {
                    _ = try await cursors.create(key, value: position.value)
                }
                return position
            } catch where error.code == .conflict {}
        }
        throw NATSError(.conflict, operation: "advance cursor \"\(key)\"", reason: "the cursor kept changing")
    }

    /// Forgets `consumer`'s cursor on `feed`.
    public func forgetCursor(feed: String, consumer: String) async throws(NATSError) {
        try await opened().cursors.delete(Self.consumerKey(feed: feed, consumer: consumer))
    }

    /// The KV key of a consumer of a feed: bytes of its name outside `[A-Za-z0-9_-]` become `=XX` (hex), as KV
    /// keys allow only a few characters and `.` separates tokens.
    static func consumerKey(feed: String, consumer: String) -> String {
        var key = "\(feed)."
        for byte in consumer.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: "-"):
                key.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                key += "=" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return key
    }

    // MARK: Pages

    /// The subject `feedd.<name>.pages.<feed>.<generation>.<page>` of a page.
    public func subject(of page: PageAddress) -> String {
        "\(pageSubjectPrefix).\(page.key)"
    }

    /// Stores `line` as `page`, with `headers` (what the fleet needs to know about the page
    /// besides its line, see FeedFleet), unless that page was already published (then the first stays).
    public func publishPage(_ page: PageAddress, line: [UInt8], headers: [String: String] = [:]) async throws(NATSError) -> PagePublication {
        _ = try await opened()
        let outcome = try await client.publish(
            subject: subject(of: page), payload: line, headers: headers, messageID: page.key, onlyIfSubjectIsEmpty: true)
        switch outcome {
        case .stored: return .published
        case .duplicate: return .alreadyPublished
        }
    }

    /// The line of `page` as published by any instance, or nil if it was not published yet.
    public func page(_ page: PageAddress) async throws(NATSError) -> [UInt8]? {
        try await publishedPage(page)?.line
    }

    /// `page` as published by any instance, with its headers, or nil if it was not published yet.
    public func publishedPage(_ page: PageAddress) async throws(NATSError) -> PublishedPage? {
        _ = try await opened()
        return try await client.lastMessage(stream: pageStream, subject: subject(of: page)).map {
            PublishedPage(page: page, line: $0.payload, headers: Self.publisherHeaders($0.headers))
        }
    }

    /// Removes the pages of an old generation of `feed` from the stream, once no instance serves
    /// it any more; nothing else ever removes a page.
    public func forgetPages(of feed: String, generation: Int) async throws(NATSError) {
        _ = try await opened()
        try await client.purge(stream: pageStream, subject: "\(pageSubjectPrefix).\(feed).\(generation).>")
    }

    /// Every page of `feed` (of every feed, if nil) published from now on, by any instance,
    /// while connected. Each call is a subscription of its own, with a thread of its own: an
    /// instance with many feeds subscribes once for all of them.
    public func pages(of feed: String?) async -> AsyncStream<PublishedPage> {
        let messages = await client.subscribe(to: "\(pageSubjectPrefix).\(feed ?? ">")\(feed == nil ? "" : ".>")")
        let prefixTokens = pageSubjectPrefix.split(separator: ".").count
        return AsyncStream { continuation in
            let forwarding = Task {
                for await message in messages {
                    let tokens = message.subject.split(separator: ".")
                    guard tokens.count == prefixTokens + 3, let generation = Int(tokens[prefixTokens + 1]),
                        let number = Int(tokens[prefixTokens + 2])
                    else { continue }
                    let page = PageAddress(feed: String(tokens[prefixTokens]), generation: generation, page: number)
                    continuation.yield(PublishedPage(page: page, line: message.payload, headers: Self.publisherHeaders(message.headers)))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in forwarding.cancel() }
        }
    }

    /// The headers the publisher gave a page, without those JetStream uses itself (`Nats-…`).
    private static func publisherHeaders(_ headers: [String: String]) -> [String: String] {
        headers.filter { !$0.key.hasPrefix("Nats-") }
    }

    private static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1_000) }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
