import FeedEngine
import FeedKit
import Glibc

/// Accepts connections on a listening socket and answers the protocol of SPEC §5: it decodes
/// what each connection reports, asks the ``FeedService`` (its only way into the engine), and
/// writes the answers back.
@MainActor
public final class Server: ConnectionContext {
    /// The limits and access rules, which a reload may change (for connections made from then on).
    public var settings: ServerSettings {
        didSet {
            service.limits = FeedService.Limits(subscriptionsPerClient: settings.maxSubscriptions)
            environment = ConnectionEnvironment(settings, loop: loop, context: self)
        }
    }
    let service: FeedService
    let logger: Logger
    let loop: EventLoop
    private let startedAt = ContinuousClock.now
    private var listeningDescriptor: Int32 = -1
    private var listener: EventLoop.Registration?
    /// Set while the process is out of file descriptors: since when, and how many connections were
    /// accepted meanwhile as descriptors freed up one by one. The episode ends when every waiting
    /// connection has been accepted; it logs one line when it starts and one when it ends.
    private var descriptorShortage: (since: ContinuousClock.Instant, accepted: Int)?
    /// Read at the first accept, after the daemon has raised its soft limit.
    private lazy var descriptorReserve = DescriptorReserve.current()
    private lazy var connectionLog = ConnectionLog(logger: logger, loop: loop)
    /// The `status` reply without its closing brace and id, shared by every request until it is
    /// older than ``statusLifetime`` or something a client did changed it.
    private var cachedStatus: (body: SharedBytes, builtAt: ContinuousClock.Instant)?
    private static let statusLifetime: Duration = .milliseconds(100)
    /// How many connections `status` lists in `peers`; `clients` has the total.
    static let statusPeerLimit = 100
    /// Every open connection.
    private var connections: [ObjectIdentifier: Connection] = [:]
    /// What connections made under the current settings share.
    private lazy var environment = ConnectionEnvironment(settings, loop: loop, context: self)
    private var connectionsAccepted = 0
    /// What connections that have closed wrote; the live ones count their own.
    private var bytesSentByClosedConnections = 0
    private var isShuttingDown = false
    private var onDrained: (() -> Void)?
    /// Called when the number of clients changes, for systemd's STATUS line.
    public var onClientsChange: (() -> Void)?

    /// A server answering through `service`, within `settings`, on `loop`.
    public init(service: FeedService, settings: ServerSettings, logger: Logger, loop: EventLoop) {
        self.service = service
        self.settings = settings
        self.logger = logger
        self.loop = loop
        service.limits = FeedService.Limits(subscriptionsPerClient: settings.maxSubscriptions)
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
            guard descriptorReserve.hasRoomBelowLine(duplicating: listeningDescriptor) else {
                pauseAccepting(because: descriptorReserve.explanation)
                return
            }
            // accept4(2) is hidden behind _GNU_SOURCE in Glibc's Swift overlay; fcntl does the same.
            let descriptor = accept(listeningDescriptor, nil, nil)
            guard descriptor >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE {
                    pauseAccepting(because: UnixSocket.lastError())
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

    /// Out of descriptors for clients (see ``DescriptorReserve``): the waiting connections stay
    /// queued in the kernel and the listener stays readable, so stop watching it rather than spin.
    /// It is watched again as soon as a client leaves, and every 100 ms meanwhile (on the loop's
    /// own timer, which needs no new descriptor), while every connected client is served as before.
    private func pauseAccepting(because reason: String) {
        guard let listener else { return }
        if descriptorShortage == nil {
            descriptorShortage = (.now, 0)
            logger.error(
                "out of file descriptors for clients (\(reason)) with \(connections.count) clients: serving them, "
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
        let connection = Connection(descriptor: descriptor, peer: peer, clientID: service.connect(), environment: environment)
        connections[ObjectIdentifier(connection)] = connection
        connectionsAccepted += 1
        connection.start(greeting: Message.hello(feeds: service.feedNames))
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

    // MARK: What connections report

    func connectionClosed(_ connection: Connection) {
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        service.disconnect(connection)
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
        service.beginShutdown()
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

    func connectionCanTakePages(_ connection: Connection) {
        service.resume(connection)
    }

    func connectionStalled(_ connection: Connection, for stallTimeout: Duration) {
        logger(for: connection.peer).warning("disconnecting \(connection.peerDescription): it read nothing for \(stallTimeout.wholeMilliseconds / 1000) s")
    }

    func connectionHasPendingRequests(_ connection: Connection) -> Bool {
        service.hasPendingRequests(connection)
    }

    func connection(_ connection: Connection, received request: Request, id: RequestID?) {
        let client = connection
        if isShuttingDown {
            connection.send(Message.error(.shuttingDown, "feedd is shutting down", id: id))
            return
        }
        switch request {
        case .status, .ping, .consumers: break
        default: cachedStatus = nil
        }
        // Answers the request: its error, or what `success` makes of the result.
        func answer<Value>(_ success: @escaping (Value) -> [UInt8]?) -> (Result<Value, ServiceError>) -> Void {
            { result in
                switch result {
                case .success(let value): if let line = success(value) { connection.send(line) }
                case .failure(let error): connection.send(Message.error(error, id: id))
                }
            }
        }
        switch request {
        case .subscribe(let name, let consumer, let after, let follow):
            service.subscribe(client, to: name, consumer: consumer, after: after, follow: follow, answer: answer { Message.subscribed($0, id: id) })
        case .next(let name, let count):
            service.next(client, feed: name, count: count, replyTo: id?.replyTag, answer: answer { $0.map { Message.subscribed($0, id: id) } })
        case .ack(let name, let page):
            let holdsOutput = connection.holdOutputForAcknowledgement()
            // One closure, not `answer`'s and another around it: an ack storm makes one per ack.
            service.acknowledge(client, feed: name, through: page) { result in
                switch result {
                case .success(let cursor):
                    var line = Message(type: "ack")
                    line.field("feed", name)
                    line.field("page", cursor)
                    connection.send(line.line(replyTo: id))
                case .failure(let error):
                    connection.send(Message.error(error, id: id))
                }
                if holdsOutput { connection.releaseOutputHold() }
            }
        case .unsubscribe(let name):
            service.unsubscribe(client, from: name, answer: answer { Message.simple("unsubscribed", feed: name, id: id) })
        case .refresh(let name):
            // A subscriber of the feed hears `refreshed` with its subscription's event.
            service.refresh(name, by: client, replyTo: id?.replyTag, answer: answer { refreshed in
                refreshed.requesterWasTold ? nil : Message.refreshed(feed: name, generation: refreshed.generation, id: id)
            })
        case .forget(let name, let consumer):
            service.forget(consumer, of: name, answer: answer {
                var line = Message(type: "forgotten")
                line.field("feed", name)
                line.field("consumer", consumer)
                return line.line(replyTo: id)
            })
        case .consumers(let name, let after, let limit):
            service.consumers(of: name, after: after, limit: limit, answer: answer { page in
                var line = Message(type: "consumers")
                line.field("feed", name)
                line.field("consumers", .array(page.consumers.map(\.json)))
                line.field("next", page.next)
                return line.line(replyTo: id)
            })
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

    /// The figures for `{"op":"metrics"}` and `daemon.metrics_file`.
    public var metrics: MetricsSnapshot {
        MetricsSnapshot(
            clients: connections.count, connectionsAccepted: connectionsAccepted,
            bytesSent: bytesSentByClosedConnections + connections.values.reduce(0) { $0 + $1.bytesSent },
            feeds: service.feedStatuses(consumers: .lag).map { feed in
                MetricsSnapshot.FeedFigures(
                    name: feed.name, counters: feed.counters, cachedPages: feed.cachedPages, subscribers: feed.subscribers, lag: feed.lag)
            },
            fleet: service.fleetStatistics,
            consumerLags: settings.metricsConsumers ? service.consumerLags().flatMap { feed in
                feed.consumers.map { MetricsSnapshot.ConsumerLagFigure(feed: feed.feed, consumer: $0.name, behind: $0.behind) }
            } : nil)
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
                var peer: [String: JSONValue] = ["subscriptions": .array(service.subscriptions(of: connection).map(JSONValue.string))]
                if let credentials = connection.peer {
                    peer["pid"] = .integer(Int64(credentials.pid))
                    peer["uid"] = .integer(Int64(credentials.uid))
                    peer["gid"] = .integer(Int64(credentials.gid))
                }
                writer.value(.object(peer))
            }
            writer.raw(UInt8(ascii: "]"))
        }
        // Shared feeds by where they stand: an instance serves clients before it has joined.
        if let cluster = service.cluster { line.field("cluster") { writer in writer.value(cluster.json) } }
        line.field("feeds") { writer in
            writer.raw(UInt8(ascii: "["))
            for (index, feed) in service.feedStatuses().enumerated() {
                if index > 0 { writer.raw(UInt8(ascii: ",")) }
                writer.value(feed.json)
            }
            writer.raw(UInt8(ascii: "]"))
        }
        let body = SharedBytes(line.openBody())
        cachedStatus = (body, .now)
        return body
    }
}
