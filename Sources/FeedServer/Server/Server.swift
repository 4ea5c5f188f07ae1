import FeedEngine
import FeedKit
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
                if errno == EMFILE || errno == ENFILE { pauseAccepting() }
                return
            }
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            admit(descriptor)
        }
    }

    /// Out of descriptors: the waiting connection stays queued and the listener stays readable,
    /// so stop watching it for a moment rather than spin (and log) until a descriptor is free.
    private func pauseAccepting() {
        guard let listener else { return }
        logger.error("cannot accept a connection: \(UnixSocket.lastError()); trying again in 100 ms")
        loop.change(listener, to: [])
        Task {
            try? await Task.sleep(for: .milliseconds(100))
            self.loop.change(listener, to: .readable)
        }
    }

    private func admit(_ descriptor: Int32) {
        let peer = UnixSocket.peerCredentials(of: descriptor)
        let peerText = peer?.description ?? "an unknown peer"
        if let peer, !settings.access.allows(peer) {
            logger(for: peer).warning("refused connection from \(peerText): not in allow_uids or allow_groups")
            refuse(descriptor, Message.error(.forbidden, "uid \(peer.uid) may not use this socket"))
            return
        }
        if isShuttingDown {
            refuse(descriptor, Message.error(.shuttingDown, "feedd is shutting down"))
            return
        }
        if connections.count >= settings.maxClients {
            logger(for: peer).warning("refused connection from \(peerText): max_clients (\(settings.maxClients)) reached")
            refuse(descriptor, Message.error(.tooManyClients, "the server already has \(settings.maxClients) clients"))
            return
        }
        logger(for: peer).info("client connected: \(peerText)")
        let connection = Connection(descriptor: descriptor, peer: peer, server: self)
        connections[ObjectIdentifier(connection)] = connection
        connectionsAccepted += 1
        connection.start(greeting: Message.hello(feeds: directory.names))
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
        Task {
            try? await Task.sleep(for: deadline)
            guard let onDrained = self.onDrained else { return }
            self.onDrained = nil
            for connection in Array(self.connections.values) { connection.close() }
            onDrained()
        }
    }

    // MARK: Requests

    func handle(_ request: Request, id: JSONValue?, from connection: Connection) {
        if isShuttingDown {
            connection.send(Message.error(.shuttingDown, "feedd is shutting down", id: id))
            return
        }
        if let name = request.feed, directory[name] == nil, !request.worksWithoutFeed {
            connection.send(Message.error(.unknownFeed, "no feed named \"\(name)\" (feeds: \(directory.names.joined(separator: ", ")))", feed: name, id: id))
            return
        }
        switch request {
        case .subscribe(let name, let consumer, let after, let follow):
            subscribe(connection, to: directory[name]!, consumer: consumer, after: after, follow: follow, id: id)
        case .next(let name, let count):
            guard let subscription = connection.subscription(for: name)
                ?? subscribe(connection, to: directory[name]!, consumer: nil, after: nil, follow: false, id: id)
            else { return }
            subscription.requestPages(count, replyTo: id)
        case .ack(let name, let page):
            guard let subscription = connection.subscription(for: name) else {
                connection.send(Message.error(.badRequest, "not subscribed to \"\(name)\"; subscribe or next first", feed: name, id: id))
                return
            }
            do {
                try subscription.acknowledge(through: page)
            } catch {
                logger.forFeed(name).error("\(error)")
                connection.send(Message.error(.badRequest, "the cursor could not be stored: \(error)", feed: name, id: id))
                return
            }
            var line = Message(type: "ack")
            line.field("feed", name)
            line.field("page", subscription.cursor)
            connection.send(line.line(replyTo: id))
        case .unsubscribe(let name):
            connection.setSubscription(nil, for: name)
            connection.send(Message.simple("unsubscribed", feed: name, id: id))
        case .refresh(let name):
            let feed = directory[name]!
            let own = connection.subscription(for: name)
            feed.refresh(requester: own, replyTo: id)
            if own == nil { connection.send(Message.refreshed(feed: name, generation: feed.generation, id: id)) }
        case .forget(let name, let consumer):
            forget(consumer, of: name, for: connection, id: id)
        case .status:
            connection.send(statusLine(id: id))
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
    private func subscribe(_ connection: Connection, to feed: Feed, consumer: String?, after: Int?, follow: Bool, id: JSONValue?) -> Subscription? {
        connection.setSubscription(nil, for: feed.name)
        guard connection.subscriptionCount < settings.maxSubscriptions else {
            connection.send(Message.error(
                .badRequest, "a connection may hold at most \(settings.maxSubscriptions) subscriptions; unsubscribe first", feed: feed.name, id: id))
            return nil
        }
        let start = feed.startingPoint(consumer: consumer, after: after)
        let subscription: Subscription
        do {
            subscription = try feed.subscribe(output: connection, consumer: consumer, after: start, follows: follow)
        } catch {
            logger.forFeed(feed.name).error("\(error)")
            connection.send(Message.error(.badRequest, "the consumer's cursor could not be stored: \(error)", feed: feed.name, id: id))
            return nil
        }
        var line = Message(type: "subscribed")
        line.field("feed", feed.name)
        line.field("consumer", consumer)
        line.field("generation", feed.generation)
        line.field("after", start)
        line.field("follow", follow)
        connection.send(line.line(replyTo: id))
        connection.setSubscription(subscription, for: feed.name)
        feed.pump(subscription)
        return subscription
    }

    /// Deletes a consumer's stored cursor, also for a feed no longer configured.
    private func forget(_ consumer: String, of feed: String, for connection: Connection, id: JSONValue?) {
        guard let store = directory.store else {
            connection.send(Message.error(.badRequest, "this daemon keeps no consumer state", feed: feed, id: id))
            return
        }
        do {
            guard try store.forget(feed: feed, consumer: consumer) else {
                connection.send(Message.error(.badRequest, "feed \"\(feed)\" has no consumer \"\(consumer)\"", feed: feed, id: id))
                return
            }
        } catch {
            connection.send(Message.error(.badRequest, "the consumer could not be forgotten: \(error)", feed: feed, id: id))
            return
        }
        logger.forFeed(feed).notice("consumer \(consumer) forgotten")
        var line = Message(type: "forgotten")
        line.field("feed", feed)
        line.field("consumer", consumer)
        connection.send(line.line(replyTo: id))
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
            })
    }

    private func statusLine(id: JSONValue?) -> [UInt8] {
        var line = Message(type: "status", capacity: 512)
        line.field("version", feeddVersion)
        line.field("uptime_s", Int((ContinuousClock.now - startedAt).components.seconds))
        line.field("clients", connections.count)
        line.field("peers") { writer in
            // Who is connected, for an administrator; capped so a status stays small.
            writer.raw(UInt8(ascii: "["))
            for (index, connection) in connections.values.prefix(1_000).enumerated() {
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
        line.field("feeds") { writer in
            writer.raw(UInt8(ascii: "["))
            for (index, name) in directory.names.enumerated() {
                if index > 0 { writer.raw(UInt8(ascii: ",")) }
                writer.value(FeedStatus(directory[name]!).json)
            }
            writer.raw(UInt8(ascii: "]"))
        }
        return line.line(replyTo: id)
    }
}
