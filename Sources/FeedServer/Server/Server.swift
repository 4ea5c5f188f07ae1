import FeedEngine
import FeedKit
import FeedState
import Glibc

/// Accepts connections on a listening socket and answers the protocol of SPEC §5.
@MainActor
public final class Server {
    public var settings: ServerSettings
    let directory: FeedDirectory
    let logger: Logger
    let loop: EventLoop
    private let startedAt = ContinuousClock.now
    private var listeningDescriptor: Int32 = -1
    private var listener: EventLoop.Registration?
    /// Set while the process is out of file descriptors: since when, and how many connections were
    /// accepted meanwhile as descriptors freed up one by one. The episode ends when every waiting
    /// connection has been accepted; it logs one line when it starts and one when it ends.
    private var descriptorShortage: (since: ContinuousClock.Instant, accepted: Int)?
    private lazy var connectionLog = ConnectionLog(logger: logger, loop: loop)
    /// The `status` reply without its closing brace and id, shared by every request until it is
    /// older than ``statusLifetime`` or something a client did changed it.
    private var cachedStatus: (body: SharedBytes, builtAt: ContinuousClock.Instant)?
    private static let statusLifetime: Duration = .milliseconds(100)
    /// How many connections `status` lists in `peers`; `clients` has the total.
    static let statusPeerLimit = 100
    private var connections: [ObjectIdentifier: Connection] = [:]
    private var connectionsAccepted = 0
    /// What connections that have closed wrote; the live ones count their own.
    private var bytesSentByClosedConnections = 0
    private var isShuttingDown = false
    private var onDrained: (() -> Void)?
    /// One read buffer for every connection: reads are handled one at a time on the main actor.
    var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// Called when the number of clients changes, for systemd's STATUS line.
    public var onClientsChange: (() -> Void)?

    public init(directory: FeedDirectory, settings: ServerSettings, logger: Logger, loop: EventLoop) {
        self.directory = directory
        self.settings = settings
        self.logger = logger
        self.loop = loop
    }

    public var clientCount: Int { connections.count }

    /// Starts accepting on `descriptor`, a listening Unix stream socket.
    public func start(listeningOn descriptor: Int32) {
        listeningDescriptor = descriptor
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        listener = loop.watch(descriptor, for: .readable) { [unowned self] _ in self.acceptPending() }
    }

    private func acceptPending() {
        for _ in 0..<256 {
            // accept4(2) is hidden behind _GNU_SOURCE in Glibc's Swift overlay; fcntl does the same.
            let descriptor = accept(listeningDescriptor, nil, nil)
            guard descriptor >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE {
                    pauseAccepting()
                } else if errno == EAGAIN || errno == EWOULDBLOCK {
                    endDescriptorShortage()
                }
                return
            }
            descriptorShortage?.accepted += 1
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            admit(descriptor)
        }
    }

    /// Out of descriptors: the waiting connections stay queued in the kernel and the listener stays
    /// readable, so stop watching it rather than spin. It is watched again as soon as a client
    /// leaves, and every 100 ms meanwhile (on the loop's own timer, which needs no new descriptor),
    /// while every connected client is served as before.
    private func pauseAccepting() {
        guard let listener else { return }
        if descriptorShortage == nil {
            descriptorShortage = (.now, 0)
            logger.error(
                "out of file descriptors (\(UnixSocket.lastError())) with \(connections.count) clients: serving them, "
                    + "and accepting new connections again once descriptors free up (raise LimitNOFILE= or lower max_clients)")
        }
        loop.change(listener, to: [])
        loop.schedule(after: .milliseconds(100)) { [weak self] in self?.resumeAccepting() }
    }

    private func resumeAccepting() {
        guard let listener, descriptorShortage != nil else { return }
        loop.change(listener, to: .readable)
    }

    private func endDescriptorShortage() {
        guard let shortage = descriptorShortage else { return }
        descriptorShortage = nil
        let seconds = Double((ContinuousClock.now - shortage.since).wholeMilliseconds) / 1000
        logger.notice("file descriptors are available again after \(seconds) s: every waiting connection accepted (\(shortage.accepted))")
    }

    private func admit(_ descriptor: Int32) {
        let peer = UnixSocket.peerCredentials(of: descriptor)
        let peerText = peer?.description ?? "an unknown peer"
        if let peer, !settings.access.allows(peer) {
            connectionLog.log(.warning, "refused connection from \(peerText): not in allow_uids or allow_groups", to: logger(for: peer))
            refuse(descriptor, Message.error(.forbidden, "uid \(peer.uid) may not use this socket"))
            return
        }
        if isShuttingDown {
            refuse(descriptor, Message.error(.shuttingDown, "feedd is shutting down"))
            return
        }
        if connections.count >= settings.maxClients {
            connectionLog.log(.warning, "refused connection from \(peerText): max_clients (\(settings.maxClients)) reached", to: logger(for: peer))
            refuse(descriptor, Message.error(.tooManyClients, "the server already has \(settings.maxClients) clients"))
            return
        }
        connectionLog.log(.info, "client connected: \(peerText)", to: logger(for: peer))
        let connection = Connection(descriptor: descriptor, peer: peer, server: self)
        connections[ObjectIdentifier(connection)] = connection
        connectionsAccepted += 1
        connection.start(greeting: Message.hello(feeds: directory.names))
        cachedStatus = nil
        onClientsChange?()
    }

    /// Best effort: one line into the fresh socket's buffer, which always has room for it, then close.
    private func refuse(_ descriptor: Int32, _ line: [UInt8]) {
        _ = line.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(descriptor)
    }

    /// The logger for records about a client: they carry its pid and uid (SPEC §10).
    func logger(for peer: PeerCredentials?) -> Logger {
        peer.map { logger.with(LogFields(peerPID: $0.pid, peerUID: $0.uid)) } ?? logger
    }

    func connectionClosed(_ connection: Connection) {
        connections[ObjectIdentifier(connection)] = nil
        cachedStatus = nil
        if descriptorShortage != nil { resumeAccepting() }
        bytesSentByClosedConnections += connection.bytesSent
        onClientsChange?()
        if isShuttingDown, connections.isEmpty, let onDrained {
            self.onDrained = nil
            onDrained()
        }
    }

    // MARK: Shutdown

    /// Says `bye` to every client and calls `completion` once every goodbye is written or
    /// `deadline` has passed, whichever is first. Meanwhile new clients are told `shutting_down`.
    public func shutdown(within deadline: Duration, completion: @escaping @MainActor () -> Void) {
        isShuttingDown = true
        guard !connections.isEmpty else { return completion() }
        onDrained = completion
        for connection in connections.values {
            connection.sendFinal(Message.bye(reason: "shutting down"))
        }
        loop.schedule(after: deadline) {
            guard let onDrained = self.onDrained else { return }
            self.onDrained = nil
            for connection in Array(self.connections.values) { connection.close() }
            onDrained()
        }
    }

    // MARK: Requests

    func handle(_ request: Request, id: RequestID?, from connection: Connection) {
        if isShuttingDown {
            connection.send(Message.error(.shuttingDown, "feedd is shutting down", id: id))
            return
        }
        if let name = request.feed, directory[name] == nil, !request.worksWithoutFeed {
            connection.send(Message.error(.unknownFeed, "no feed named \"\(name)\" (feeds: \(directory.names.joined(separator: ", ")))", feed: name, id: id))
            return
        }
        switch request {
        case .status, .ping: break
        default: cachedStatus = nil
        }
        switch request {
        case .subscribe(let name, let consumer, let after, let follow):
            subscribe(connection, to: directory[name]!, consumer: consumer, after: after, follow: follow, id: id)
        case .next(let name, let count):
            guard let subscription = connection.subscription(for: name)
                ?? subscribe(connection, to: directory[name]!, consumer: nil, after: nil, follow: false, id: id)
            else { return }
            subscription.requestPages(count, replyTo: id?.replyTag) { error in
                connection.send(Message.error(.storeFailed, "the pages delivered before this next could not be acknowledged, so none was sent: \(error)", feed: name, id: id))
            }
        case .ack(let name, let page):
            guard let subscription = connection.subscription(for: name) else {
                connection.send(Message.error(.badRequest, "not subscribed to \"\(name)\"; subscribe or next first", feed: name, id: id))
                return
            }
            subscription.acknowledge(through: page) { result in
                switch result {
                case .success(let cursor):
                    var line = Message(type: "ack")
                    line.field("feed", name)
                    line.field("page", cursor)
                    connection.send(line.line(replyTo: id))
                case .failure(let error):
                    connection.send(Message.error(.storeFailed, "the cursor could not be stored: \(error)", feed: name, id: id))
                }
            }
        case .unsubscribe(let name):
            connection.setSubscription(nil, for: name)
            connection.send(Message.simple("unsubscribed", feed: name, id: id))
        case .refresh(let name):
            let own = connection.subscription(for: name)
            directory.refresh(name, requester: own, replyTo: id?.replyTag) { result in
                switch result {
                case .success(let generation):
                    // A subscriber of the feed hears `refreshed` with its subscription's event.
                    if own == nil { connection.send(Message.refreshed(feed: name, generation: generation, id: id)) }
                case .failure(let error):
                    connection.send(Message.error(.storeFailed, "the new generation could not be stored: \(error)", feed: name, id: id))
                }
            }
        case .forget(let name, let consumer):
            forget(consumer, of: name, for: connection, id: id)
        case .status:
            connection.send(statusBody())
            connection.send(Message.closing(replyTo: id))
        case .metrics:
            var line = Message(type: "metrics")
            line.field("text", metrics.text)
            connection.send(line.line(replyTo: id))
        case .ping:
            connection.send(Message.simple("pong", id: id))
        case .quit:
            connection.sendFinal(Message.bye(reason: "quit", id: id))
        }
    }

    /// Subscribes and answers `subscribed`, or answers an error and returns nil.
    @discardableResult
    private func subscribe(_ connection: Connection, to feed: Feed, consumer: String?, after: Int?, follow: Bool, id: RequestID?) -> Subscription? {
        connection.setSubscription(nil, for: feed.name)
        guard connection.subscriptionCount < settings.maxSubscriptions else {
            connection.send(Message.error(
                .badRequest, "a connection may hold at most \(settings.maxSubscriptions) subscriptions; unsubscribe first", feed: feed.name, id: id))
            return nil
        }
        let start = feed.startingPoint(consumer: consumer, after: after)
        let subscription = feed.subscribe(output: connection, consumer: consumer, after: start, follows: follow)
        guard let consumer, feed.keepsCursors else {
            announce(subscription, of: feed, on: connection, after: start, id: id)
            connection.setSubscription(subscription, for: feed.name)
            feed.pump(subscription)
            return subscription
        }
        // Held (requests queue on it, no page flows) until the starting point is durable.
        subscription.isConfirmed = false
        connection.setSubscription(subscription, for: feed.name)
        Task {
            let confirmedStart: Int
            do throws(StoreError) {
                confirmedStart = try await feed.confirmConsumer(consumer, after: after, start: start)
            } catch {
                guard connection.subscription(for: feed.name) === subscription else { return }
                let waiting = subscription.pendingReplyIDs
                connection.setSubscription(nil, for: feed.name)
                let message = "the cursor of consumer \"\(consumer)\" could not be stored: \(error)"
                connection.send(Message.error(.storeFailed, message, feed: feed.name, id: id))
                for replyTo in waiting { connection.send(Message.error(.storeFailed, message, feed: feed.name, id: RequestID(replyTag: replyTo))) }
                return
            }
            guard connection.subscription(for: feed.name) === subscription else { return }
            subscription.start(after: confirmedStart)
            subscription.isConfirmed = true
            announce(subscription, of: feed, on: connection, after: confirmedStart, id: id)
            feed.pump(subscription)
        }
        return subscription
    }

    /// Answers `subscribed`.
    private func announce(_ subscription: Subscription, of feed: Feed, on connection: Connection, after start: Int, id: RequestID?) {
        var line = Message(type: "subscribed")
        line.field("feed", feed.name)
        line.field("consumer", subscription.consumer)
        line.field("generation", feed.generation)
        line.field("after", start)
        line.field("follow", subscription.follows)
        connection.send(line.line(replyTo: id))
    }

    /// Deletes a consumer's stored cursor, also for a feed no longer configured; answers once
    /// that is durable.
    private func forget(_ consumer: String, of feed: String, for connection: Connection, id: RequestID?) {
        guard let store = directory.store else {
            connection.send(Message.error(.badRequest, "this daemon keeps no consumer state", feed: feed, id: id))
            return
        }
        let shared = directory[feed].flatMap { $0.keepsCursorsInFleet ? $0 : nil }
        Task {
            do throws(StoreError) {
                // The fleet's cursor first: a consumer forgotten here only would resume from it.
                try await shared?.forgetFleetCursor(consumer)
                guard try await store.forget(feed: feed, consumer: consumer) || shared != nil else {
                    connection.send(Message.error(.badRequest, "feed \"\(feed)\" has no consumer \"\(consumer)\"", feed: feed, id: id))
                    return
                }
            } catch {
                connection.send(Message.error(.storeFailed, "the consumer could not be forgotten: \(error)", feed: feed, id: id))
                return
            }
            logger.forFeed(feed).notice("consumer \(consumer) forgotten")
            var line = Message(type: "forgotten")
            line.field("feed", feed)
            line.field("consumer", consumer)
            connection.send(line.line(replyTo: id))
        }
    }

    /// The figures for `{"op":"metrics"}` and `daemon.metrics_file`.
    public var metrics: MetricsSnapshot {
        MetricsSnapshot(
            clients: connections.count, connectionsAccepted: connectionsAccepted,
            bytesSent: bytesSentByClosedConnections + connections.values.reduce(0) { $0 + $1.bytesSent },
            feeds: directory.names.compactMap { name in
                directory[name].map { feed in
                    MetricsSnapshot.FeedFigures(name: name, counters: feed.counters, cachedPages: feed.cachedPages, subscribers: feed.subscriberCount)
                }
            },
            fleet: directory.fleet?.statistics)
    }

    /// The `status` reply up to its closing brace. Built at most every ``statusLifetime`` however
    /// often clients ask, and bounded in size: `peers` lists at most ``statusPeerLimit`` clients.
    private func statusBody() -> SharedBytes {
        if let cachedStatus, ContinuousClock.now - cachedStatus.builtAt < Self.statusLifetime { return cachedStatus.body }
        var line = Message(type: "status", capacity: 4096)
        line.field("version", feeddVersion)
        line.field("uptime_s", Int((ContinuousClock.now - startedAt).components.seconds))
        line.field("clients", connections.count)
        line.field("peers") { writer in
            // Who is connected, for an administrator; capped so a status stays small.
            writer.raw(UInt8(ascii: "["))
            for (index, connection) in connections.values.prefix(Self.statusPeerLimit).enumerated() {
                if index > 0 { writer.raw(UInt8(ascii: ",")) }
                var peer: [String: JSONValue] = ["subscriptions": .array(connection.subscribedFeeds.map(JSONValue.string))]
                if let credentials = connection.peer {
                    peer["pid"] = .integer(Int64(credentials.pid))
                    peer["uid"] = .integer(Int64(credentials.uid))
                    peer["gid"] = .integer(Int64(credentials.gid))
                }
                writer.value(.object(peer))
            }
            writer.raw(UInt8(ascii: "]"))
        }
        if let clusterName = directory.clusterName {
            let state = directory.fleet?.isConnected == true ? "connected" : "disconnected"
            // Shared feeds by where they stand: an instance serves clients before it has joined.
            var feeds: [String: [JSONValue]] = ["joined": [], "joining": [], "alone": []]
            for name in directory.names { if let fleetState = directory[name]?.fleetState { feeds[fleetState]?.append(.string(name)) } }
            var cluster: [String: JSONValue] = ["state": .string(state), "name": .string(clusterName)]
            for (fleetState, names) in feeds { cluster[fleetState] = .array(names) }
            if let fleet = directory.fleet?.statistics { cluster.merge(fleet.statusFields) { _, new in new } }
            line.field("cluster") { writer in writer.value(.object(cluster)) }
        }
        line.field("feeds") { writer in
            writer.raw(UInt8(ascii: "["))
            for (index, name) in directory.names.enumerated() {
                if index > 0 { writer.raw(UInt8(ascii: ",")) }
                writer.value(FeedStatus(directory[name]!).json)
            }
            writer.raw(UInt8(ascii: "]"))
        }
        let body = SharedBytes(line.openBody())
        cachedStatus = (body, .now)
        return body
    }
}
