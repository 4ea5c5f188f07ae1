import FeedKit
import Foundation

/// A fleet's shared leases, generations, cursors and pages, kept in NATS JetStream (SPEC §8).
/// The README's "How a fleet keeps its state" lays out the streams, buckets and their values,
/// and what the engine calls when.
///
/// Nothing read from the cluster is believed unchecked: every record is opened with the fleet
/// key (if there is one), held to ``RecordLimits`` and its kind's rules, and a record that fails
/// is counted in ``rejections`` and treated as absent, never used.
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
        /// Who this instance is to the NATS servers.
        public var authentication = NATSClient.Authentication.none
        public var tls = NATSClient.TLSFiles()
        /// The fleet key every record is sealed with and checked against; nil for none.
        public var fleetKey: FleetKey?
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
    struct Resources: Sendable {
        let leases: KeyValueBucket
        let generations: KeyValueBucket
        let cursors: KeyValueBucket
        let consumers: KeyValueBucket
    }

    /// How far past now + `lease` another host's lease may expire and still be believed: the
    /// clocks of a fleet's hosts differ by this much at most (they run NTP).
    static let clockSkewAllowance: Duration = .seconds(1)

    public let configuration: Configuration
    public let client: NATSClient
    /// Every record rejected so far, by reason.
    public let rejections: ClusterRejections
    let logger: Logger
    private let resources = Locked<Resources?>(nil)
    /// The highest generation of each feed believed so far: the fleet's generations only go forward.
    let generationFloor = Locked<[String: Int]>([:])
    let pageStream: String
    let pageSubjectPrefix: String

    private init(configuration: Configuration, client: NATSClient, logger: Logger) {
        self.configuration = configuration
        self.client = client
        self.logger = logger
        rejections = ClusterRejections(logger: logger)
        pageStream = "feedd-\(configuration.name)-pages"
        pageSubjectPrefix = "feedd.\(configuration.name).pages"
    }

    /// Connects to the cluster; an unreachable one is retried in the background, not an error.
    public static func connect(_ configuration: Configuration, logger: Logger) async throws(NATSError) -> ClusterStore {
        var options = NATSClient.Options(servers: configuration.servers, name: "feedd \(configuration.instance)")
        options.authentication = configuration.authentication
        options.tls = configuration.tls
        options.requestTimeout = configuration.requestTimeout
        options.pingInterval = configuration.pingInterval
        return ClusterStore(configuration: configuration, client: try await NATSClient.connect(options), logger: logger)
    }

    /// Whether the cluster can be reached now.
    public var state: ConnectionState { client.state }

    /// The connection state now, then every change.
    public func states() -> AsyncStream<ConnectionState> { client.states() }

    /// The URL of the server this instance is connected to, or nil while disconnected.
    public func connectedServer() async -> String? { await client.connectedServer() }

    /// Ends every stream of this store and closes the connection.
    public func close() async { await client.close() }

    func opened() async throws(NATSError) -> Resources {
        if let resources = resources.withLock({ $0 }) { return resources }
        let name = configuration.name
        let replicas = configuration.replicas
        // One message per subject, and the first one stays: a later publication on an address,
        // by any client, is refused by the server (SPEC §8).
        let pages = StreamConfiguration(
            name: pageStream, subjects: ["\(pageSubjectPrefix).>"], replicas: replicas, maxMessagesPerSubject: 1,
            duplicateWindow: .seconds(120), keepsFirstMessagePerSubject: true)
        if try await client.ensureStream(pages) == .updated {
            logger.notice("stream \(pageStream), made by an older feedd, now keeps the first page published at each address and refuses later ones")
        }
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

    // MARK: Sealed values

    /// `value` (one JSON object) as it is written under `key`: with the fleet key, its seal
    /// added as its last member, `"mac"`.
    func sealed(_ value: [UInt8], _ reason: Rejection.Reason, key: String) -> [UInt8] {
        guard let fleetKey = configuration.fleetKey else { return value }
        let seal = fleetKey.seal(kind: reason.rawValue, address: "\(configuration.name)/\(key)", value)
        return value.dropLast() + Array(#","mac":""#.utf8) + Array(seal.utf8) + Array(#""}"#.utf8)
    }

    /// What ``sealed(_:_:key:)`` sealed, if `value` carries a seal made with the fleet key (or
    /// as it is, without a fleet key); a rejection otherwise.
    func unsealed(_ value: [UInt8], _ reason: Rejection.Reason, key: String, in bucket: KeyValueBucket) -> Result<[UInt8], Rejection> {
        guard let fleetKey = configuration.fleetKey else { return .success(value) }
        let head = Array(#","mac":""#.utf8)
        let tail = Array(#""}"#.utf8)
        let sealStart = value.count - tail.count - FleetKey.tagLength
        guard sealStart > head.count, value.suffix(tail.count).elementsEqual(tail), value[(sealStart - head.count)..<sealStart].elementsEqual(head)
        else { return .failure(Rejection(.mac, at: "\(bucket.name) \(key)", "the \(reason.rawValue) carries no seal")) }
        let body = Array(value[..<(sealStart - head.count)]) + [UInt8(ascii: "}")]
        guard fleetKey.verifies(value[sealStart..<(value.count - tail.count)], kind: reason.rawValue, address: "\(configuration.name)/\(key)", body) else {
            return .failure(Rejection(.mac, at: "\(bucket.name) \(key)", "the \(reason.rawValue)'s seal was not made with the fleet key"))
        }
        return .success(body)
    }

    /// The record `decode` makes of `entry`, unsealed; nil, counted and logged, if it is not valid.
    func record<Value>(
        _ entry: KeyValueBucket.Entry, in bucket: KeyValueBucket, _ reason: Rejection.Reason,
        _ decode: ([UInt8], String) -> Result<Value, Rejection>
    ) -> Value? {
        guard entry.isPresent else { return nil }
        switch unsealed(entry.value, reason, key: entry.key, in: bucket).flatMap({ decode($0, "\(bucket.name) \(entry.key)") }) {
        case .success(let value): return value
        case .failure(let rejection):
            rejections.record(rejection)
            return nil
        }
    }

    // MARK: Generations

    /// The fleet's current generation of `feed`, if any instance started one (and it is valid).
    public func generation(of feed: String) async throws(NATSError) -> FeedGeneration? {
        let generations = try await opened().generations
        return try await generations.entry(feed).flatMap { believed(generation: $0, in: generations) }
    }

    /// The generation in `entry`, if valid and not behind one already believed.
    private func believed(generation entry: KeyValueBucket.Entry, in bucket: KeyValueBucket) -> FeedGeneration? {
        record(entry, in: bucket, .generation) { value, address in
            FeedGeneration.decode(key: entry.key, value: value, revision: entry.revision, address: address).flatMap { generation in
                generationFloor.withLock { floor -> Result<FeedGeneration, Rejection> in
                    let highest = floor[generation.feed] ?? 0
                    guard generation.generation >= highest else {
                        return .failure(Rejection(.generation, at: address, "generation \(generation.generation) would go back from \(highest)"))
                    }
                    floor[generation.feed] = generation.generation
                    return .success(generation)
                }
            }
        }
    }

    /// Starts the generation after `current` (or the first, numbered `firstNumber`, if nil) with
    /// `seed`. If another instance started one first (a concurrent refresh, or a join), returns
    /// that one instead. A stored generation that is not valid is replaced. The first instance
    /// to join a feed numbers the fleet's first generation after the one it was serving, so its
    /// subscribers never see the number go back.
    public func startGeneration(
        of feed: String, replacing current: FeedGeneration?, seed: String, fingerprint: String, firstNumber: Int = 1
    ) async throws(NATSError) -> FeedGeneration {
        let generations = try await opened().generations
        let number = current.map { $0.generation + 1 } ?? firstNumber
        guard (1...Int(RecordLimits.maximumGeneration)).contains(number) else {
            throw NATSError(.failed, operation: "start generation \(number) of feed \(feed)", reason: "generations end at \(RecordLimits.maximumGeneration)")
        }
        let next = FeedGeneration(feed: feed, generation: number, seed: seed, fingerprint: fingerprint, revision: 0)
        let value = sealed(next.value, .generation, key: feed)
        do {
            let revision =
                if let current {
                    try await generations.update(feed, to: value, expecting: current.revision)
                } else {
                    try await generations.create(feed, value: value)
                }
            return believe(next.with(revision: revision))
        } catch where error.code == .conflict {
            guard let stored = try await generations.entry(feed) else { throw error }
            if let winner = believed(generation: stored, in: generations) { return winner }
            // What is stored is not a generation any instance wrote: write over it.
            return believe(next.with(revision: try await generations.update(feed, to: value, expecting: stored.revision)))
        }
    }

    private func believe(_ generation: FeedGeneration) -> FeedGeneration {
        generationFloor.withLock { $0[generation.feed] = max($0[generation.feed] ?? 0, generation.generation) }
        return generation
    }

    /// Every feed's current generation, then every new one, from any instance, until the store
    /// is closed. Works across outages: the current generations come again after each
    /// reconnection, and an instance that started without the cluster gets them once it joins.
    public func generations() -> AsyncStream<FeedGeneration> {
        watchForever(\.generations) { store, entry, bucket in store.believed(generation: entry, in: bucket) }
    }

    /// Watches every key of a bucket for as long as the store is open, opening the bucket when
    /// the cluster can be reached (maybe only later) and again after each reconnection.
    func watchForever<Element: Sendable>(
        _ bucket: KeyPath<Resources, KeyValueBucket> & Sendable,
        decode: @escaping @Sendable (ClusterStore, KeyValueBucket.Entry, KeyValueBucket) -> Element?
    ) -> AsyncStream<Element> {
        let (elements, continuation) = AsyncStream.makeStream(of: Element.self)
        let forwarding = Task {
            defer { continuation.finish() }
            while !Task.isCancelled {
                let watched: KeyValueBucket
                let entries: AsyncStream<KeyValueBucket.Entry>
                do {
                    watched = try await opened()[keyPath: bucket]
                    entries = await watched.watch(">")
                } catch {
                    // The bucket can only be opened once the cluster is reachable and has a leader.
                    guard await client.isConnected(after: .milliseconds(250)) else { return }
                    continue
                }
                for await entry in entries {
                    if let element = decode(self, entry, watched) { continuation.yield(element) }
                }
                return
            }
        }
        continuation.onTermination = { _ in forwarding.cancel() }
        return elements
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1_000) }
}
