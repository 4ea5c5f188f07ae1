import FeedKit
import CNATS
import Foundation

/// One connection to a NATS cluster, its JetStream context, and the key-value buckets opened on
/// it: the only owner of libnats handles in feedd.
///
/// Rules it keeps:
/// - No libnats call runs on the caller's thread. Calls that wait on the network run on the
///   client's own worker threads (``BlockingWorkers``) and resume the awaiting caller; every one
///   is bounded by ``Options/requestTimeout``. Watches and subscriptions each get a thread of their
///   own that turns libnats's blocking `next` into an `AsyncStream`.
/// - While the connection is down, calls fail at once with ``NATSError/Code/unavailable`` instead
///   of queueing in libnats's reconnect buffer, so a caller learns of the outage immediately.
/// - The connection never gives up on its own: an unreachable (or refusing) cluster at start is
///   tried again every ``Options/reconnectWait``, each failed attempt told by ``reports()`` with
///   its reason; a connection lost later is re-established by libnats, and ``states()`` says
///   when it is back. (libnats itself gives up if a server refuses the credentials twice in a
///   row after a reconnection: ``ConnectionReport/gaveUp(reason:)``.)
public final class NATSClient: Sendable {
    /// How to reach the cluster and how patient to be with it.
    public struct Options: Sendable {
        /// `nats://` or `tls://` URLs of any servers of the cluster.
        public var servers: [String]
        /// The connection's name, as the servers' monitoring shows it.
        public var name: String
        /// Who this client is to the servers.
        public var authentication = Authentication.none
        /// Whom to trust, and the client certificate for servers that verify clients.
        public var tls = TLSFiles()
        /// The longest any single call waits for the cluster (JetStream requests and connects).
        public var requestTimeout: Duration = .seconds(2)
        /// How often an idle connection is pinged; two unanswered pings mark it disconnected.
        public var pingInterval: Duration = .seconds(2)
        /// The pause between two rounds of connection attempts.
        public var reconnectWait: Duration = .milliseconds(500)

        public init(servers: [String], name: String) {
            self.servers = servers
            self.name = name
        }
    }

    /// A received message: its subject, its payload and its headers, copied out of libnats.
    public struct Message: Sendable, Equatable {
        public let subject: String
        public let payload: [UInt8]
        /// Each header's first value.
        public var headers: [String: String] = [:]
        /// Its sequence number in a stream, for a message read from one (0 otherwise).
        public var sequence: UInt64 = 0
    }

    /// What a ``publish(subject:payload:headers:messageID:onlyIfSubjectIsEmpty:)`` did.
    public enum PublishOutcome: Sendable, Equatable {
        /// The stream stored the message under this sequence number.
        case stored(sequence: UInt64)
        /// The stream already had it (same message id, or the subject already held a message).
        case duplicate
    }

    let options: Options
    private let secrets: ConnectionSecrets
    /// Set once, by the first attempt that connects; never replaced (buckets are bound to it).
    private let connection = Locked<ConnectionHandles?>(nil)
    let events: ConnectionEvents
    let workers: BlockingWorkers
    private let pumps = Locked<[ObjectIdentifier: StreamPump]>([:])
    private let buckets = Locked<[UnsafeHandle]>([])
    private let isClosing = Locked(false)

    private init(options: Options, secrets: ConnectionSecrets) {
        self.options = options
        self.secrets = secrets
        events = ConnectionEvents()
        workers = BlockingWorkers(threadCount: 4, name: "feedd-nats")
    }

    /// Connects to the cluster. Returns as soon as the first attempt is over: if it failed, the
    /// client keeps trying in the background, ``state`` is `.disconnected`, and ``reports()``
    /// says why each attempt failed. Throws only for what retrying cannot fix, such as an
    /// unreadable password or credentials file.
    public static func connect(_ options: Options) async throws(NATSError) -> NATSClient {
        let client = NATSClient(options: options, secrets: try ConnectionSecrets.read(options))
        if let failure = await client.attemptToConnect() {
            client.events.report(.attemptFailed(failure))
            Task { await client.keepConnecting(lastFailure: failure) }
        }
        return client
    }

    /// One attempt; nil once connected.
    private func attemptToConnect() async -> NATSError? {
        let (options, secrets, events) = (options, secrets, events)
        do {
            let handles = try await workers.run { () throws(NATSError) in try ConnectionHandles.connect(options, secrets: secrets, events: events) }
            let kept = isClosing.withLock { closing in
                connection.withLock { if !closing { $0 = handles } }
                return !closing
            }
            guard kept else {
                Thread.detachNewThread { handles.destroy() }
                return nil
            }
            events.connected(to: handles.serverURL)
            return nil
        } catch {
            return error
        }
    }

    /// Attempts again every ``Options/reconnectWait`` until one connects or the client is closed,
    /// reporting an attempt's failure whenever it differs from the one before.
    private func keepConnecting(lastFailure: NATSError) async {
        var last = lastFailure.description
        while !isClosing.withLock({ $0 }) {
            try? await Task.sleep(for: options.reconnectWait)
            guard let failure = await attemptToConnect() else { return }
            if failure.description != last { events.report(.attemptFailed(failure)) }
            last = failure.description
        }
    }

    /// The connection's state now.
    public var state: ConnectionState { events.state }

    /// The connection's state now, then every change, until the client is closed.
    public func states() -> AsyncStream<ConnectionState> { events.subscribe() }

    /// Every connection, loss, recovery and refusal from now on, until the client is closed.
    public func reports() -> AsyncStream<ConnectionReport> { events.subscribeToReports() }

    /// How many times the connection was made again after it was lost.
    public var reconnections: Int { events.reconnections }

    /// Waits `pause`, then until the connection is up; false if the client was closed meanwhile.
    func isConnected(after pause: Duration) async -> Bool {
        try? await Task.sleep(for: pause)
        for await state in states() {
            if state == .connected { return !Task.isCancelled }
            if state == .closed { return false }
        }
        return false
    }

    /// The URL of the server the client is connected to (without credentials), or nil while disconnected.
    public func connectedServer() async -> String? {
        try? await perform("read the connected server's URL") { handles in
            var buffer = [CChar](repeating: 0, count: 256)
            guard natsConnection_GetConnectedUrl(handles.connection, &buffer, buffer.count) == NATS_OK, buffer[0] != 0 else { return nil }
            return Self.redacted(text(of: buffer))
        }
    }

    /// Closes the connection: new calls fail at once, calls under way and every watch and
    /// subscription end, then libnats's handles are freed. Calling it again does nothing.
    public func close() async {
        guard isClosing.withLock({ closing in defer { closing = true }; return !closing }) else { return }
        events.closed()
        let running = pumps.withLock { pumps in
            defer { pumps.removeAll() }
            return Array(pumps.values)
        }
        for pump in running { pump.stop() }
        for pump in running { await pump.finished() }
        // No call may use the handles once they are freed: let the workers finish first.
        await workers.stop()
        let buckets = buckets.withLock { $0 }
        guard let handles = connection.withLock({ $0 }) else { return }
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                for bucket in buckets { kvStore_Destroy(bucket.pointer) }
                handles.destroy()
                finished.resume()
            }
            thread.name = "feedd-nats-close"
            thread.start()
        }
    }

    // MARK: Calls on the workers

    /// Keeps `bucket` until ``close()``, which frees it before the connection.
    func remember(bucket: UnsafeHandle) {
        buckets.withLock { $0.append(bucket) }
    }

    /// Runs `body` with the connection's handles on a worker thread; fails at once while disconnected.
    func perform<Value: Sendable>(
        _ operation: @autoclosure () -> String, _ body: @escaping @Sendable (ConnectionHandles) throws(NATSError) -> Value
    ) async throws(NATSError) -> Value {
        guard events.state == .connected, let handles = connection.withLock({ $0 }) else {
            throw NATSError(.unavailable, operation: operation(), reason: "not connected to the NATS cluster")
        }
        return try await workers.run { () throws(NATSError) in try body(handles) }
    }

    /// Every message published on `subject` (wildcards allowed) from now on, as long as the
    /// stream is iterated. The server knows of the subscription when this returns, if connected;
    /// messages published while the connection is down are not delivered.
    public func subscribe(to subject: String) async -> AsyncStream<Message> {
        let source = BlockingSource<Message>(
            reopenAfterReconnect: false,
            open: { [connection] () throws(NATSError) -> UnsafeHandle in
                guard let handles = connection.withLock({ $0 }) else {
                    throw NATSError(.unavailable, operation: "subscribe to \"\(subject)\"", reason: "not connected to the NATS cluster")
                }
                var subscription: OpaquePointer?
                var status = natsConnection_SubscribeSync(&subscription, handles.connection, subject)
                if status == NATS_OK { status = natsSubscription_SetPendingLimits(subscription, -1, -1) }
                // A flush round trip, so the server has the subscription before the caller goes on.
                if status == NATS_OK { status = natsConnection_FlushTimeout(handles.connection, handles.requestTimeout) }
                guard status == NATS_OK, let subscription else {
                    natsSubscription_Destroy(subscription)
                    throw NATSError(status: status, operation: "subscribe to \"\(subject)\"")
                }
                return UnsafeHandle(subscription)
            },
            next: { subscription in
                var message: OpaquePointer?
                let status = natsSubscription_NextMsg(&message, subscription.pointer, StreamPump.pollMilliseconds)
                defer { natsMsg_Destroy(message) }
                switch status {
                case NATS_OK:
                    guard let message else { return .idle }
                    return .element(Self.copy(message))
                case NATS_TIMEOUT, NATS_SLOW_CONSUMER: return .idle
                default: return .broken
                }
            },
            close: { natsSubscription_Destroy($0.pointer) })
        return await stream(named: "feedd-nats-sub", from: source)
    }

    /// Starts a thread that feeds an `AsyncStream` from `source`; returns once its first open was tried.
    func stream<Element: Sendable>(named name: String, from source: BlockingSource<Element>) async -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        let pump = StreamPump(name: name, source: source, events: events, continuation: continuation)
        let key = ObjectIdentifier(pump)
        pumps.withLock { $0[key] = pump }
        continuation.onTermination = { [weak self] _ in
            pump.stop()
            _ = self?.pumps.withLock { $0.removeValue(forKey: key) }
        }
        await pump.firstOpenTried()
        return stream
    }

    /// A message's subject, payload and headers, copied out of libnats.
    static func copy(_ message: OpaquePointer) -> Message {
        var headers: [String: String] = [:]
        var keys: UnsafeMutablePointer<UnsafePointer<CChar>?>?
        var count: Int32 = 0
        if natsMsgHeader_Keys(message, &keys, &count) == NATS_OK, let keys {
            for index in 0..<Int(count) {
                guard let key = keys[index] else { continue }
                var value: UnsafePointer<CChar>?
                if natsMsgHeader_Get(message, key, &value) == NATS_OK, let value { headers[String(cString: key)] = String(cString: value) }
            }
            free(keys)
        }
        return Message(
            subject: String(cString: natsMsg_GetSubject(message)), payload: payload(of: message), headers: headers, sequence: natsMsg_GetSequence(message))
    }

    static func payload(of message: OpaquePointer) -> [UInt8] {
        let length = Int(natsMsg_GetDataLength(message))
        guard length > 0, let data = natsMsg_GetData(message) else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }
}
