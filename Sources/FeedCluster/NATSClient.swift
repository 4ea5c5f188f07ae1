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
/// - The connection never gives up: an unreachable cluster at start, or a lost one later, is
///   retried forever in the background, and ``states()`` says when it is back.
public final class NATSClient: Sendable {
    /// How to reach the cluster and how patient to be with it.
    public struct Options: Sendable {
        /// `nats://` or `tls://` URLs of any servers of the cluster.
        public var servers: [String]
        /// The connection's name, as the servers' monitoring shows it.
        public var name: String
        /// A NATS credentials file (JWT and NKey seed), if the cluster requires one.
        public var credentialsFile: String?
        /// A PEM file of the certificate authorities to trust for `tls://` servers.
        public var trustedCertificatesFile: String?
        /// The longest any single call waits for the cluster (JetStream requests and connects).
        public var requestTimeout: Duration = .seconds(2)
        /// How often an idle connection is pinged; two unanswered pings mark it disconnected.
        public var pingInterval: Duration = .seconds(2)
        /// The pause between two rounds of reconnection attempts.
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
    }

    /// What a ``publish(subject:payload:messageID:onlyIfSubjectIsEmpty:)`` did.
    public enum PublishOutcome: Sendable, Equatable {
        /// The stream stored the message under this sequence number.
        case stored(sequence: UInt64)
        /// The stream already had it (same message id, or the subject already held a message).
        case duplicate
    }

    let handles: ConnectionHandles
    let events: ConnectionEvents
    let workers: BlockingWorkers
    private let pumps = Locked<[ObjectIdentifier: StreamPump]>([:])
    private let buckets = Locked<[UnsafeHandle]>([])
    private let isClosing = Locked(false)

    private init(handles: ConnectionHandles, events: ConnectionEvents, workers: BlockingWorkers) {
        self.handles = handles
        self.events = events
        self.workers = workers
    }

    /// Connects to the cluster. Returns as soon as the first attempt is over: if no server
    /// answered, the client keeps trying in the background and ``state`` is `.disconnected`.
    /// Throws only for what retrying cannot fix, such as an unreadable credentials file.
    public static func connect(_ options: Options) async throws(NATSError) -> NATSClient {
        let workers = BlockingWorkers(threadCount: 4, name: "feedd-nats")
        let events = ConnectionEvents()
        do {
            let handles = try await workers.run { () throws(NATSError) in try ConnectionHandles.connect(options, events: events) }
            return NATSClient(handles: handles, events: events, workers: workers)
        } catch {
            await workers.stop()
            throw error
        }
    }

    /// The connection's state now.
    public var state: ConnectionState { events.state }

    /// The connection's state now, then every change, until the client is closed.
    public func states() -> AsyncStream<ConnectionState> { events.subscribe() }

    /// Waits `pause`, then until the connection is up; false if the client was closed meanwhile.
    func isConnected(after pause: Duration) async -> Bool {
        try? await Task.sleep(for: pause)
        for await state in states() {
            if state == .connected { return !Task.isCancelled }
            if state == .closed { return false }
        }
        return false
    }

    /// The URL of the server the client is connected to, or nil while disconnected.
    public func connectedServer() async -> String? {
        try? await perform("read the connected server's URL") { handles in
            var buffer = [CChar](repeating: 0, count: 256)
            guard natsConnection_GetConnectedUrl(handles.connection, &buffer, buffer.count) == NATS_OK, buffer[0] != 0 else { return nil }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
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
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            let thread = Thread { [handles] in
                for bucket in buckets { kvStore_Destroy(bucket.pointer) }
                handles.destroy()
                finished.resume()
            }
            thread.name = "feedd-nats-close"
            thread.start()
        }
    }

    // MARK: Calls on the workers

    /// Runs `body` with the connection's handles on a worker thread; fails at once while disconnected.
    func perform<Value: Sendable>(
        _ operation: @autoclosure () -> String, _ body: @escaping @Sendable (ConnectionHandles) throws(NATSError) -> Value
    ) async throws(NATSError) -> Value {
        guard events.state == .connected else {
            throw NATSError(.unavailable, operation: operation(), reason: "not connected to the NATS cluster")
        }
        return try await workers.run { [handles] () throws(NATSError) in try body(handles) }
    }

    /// Makes sure the stream `configuration` exists; one made earlier with other settings is kept.
    public func addStream(_ configuration: StreamConfiguration) async throws(NATSError) {
        try await perform("create stream \"\(configuration.name)\"") { handles throws(NATSError) in
            try configuration.withCConfig { config throws(NATSError) in
                var serverError = jsErrCode(rawValue: 0)
                var info: UnsafeMutablePointer<jsStreamInfo>?
                let status = js_AddStream(&info, handles.jetStream, &config, nil, &serverError)
                jsStreamInfo_Destroy(info)
                guard status != NATS_OK, serverError != JSStreamNameExistErr else { return }
                let failure = NATSError(status: status, operation: "create stream \"\(configuration.name)\"", serverError: serverError)
                // Another instance may have created it in between, or with other settings.
                let existing = js_GetStreamInfo(&info, handles.jetStream, configuration.name, nil, nil)
                jsStreamInfo_Destroy(info)
                guard existing == NATS_OK else { throw failure }
            }
        }
    }

    /// Opens the key-value bucket `configuration`, creating it if it does not exist yet.
    public func keyValueBucket(_ configuration: BucketConfiguration) async throws(NATSError) -> KeyValueBucket {
        let store = try await perform("open bucket \"\(configuration.name)\"") { handles throws(NATSError) in
            try configuration.open(in: handles.jetStream)
        }
        buckets.withLock { $0.append(store) }
        return KeyValueBucket(client: self, store: store, name: configuration.name)
    }

    /// Publishes `payload` (with `headers`) on `subject` into the stream that captures it and
    /// waits for the stream's acknowledgement. `messageID` de-duplicates within the stream's
    /// duplicate window; `onlyIfSubjectIsEmpty` refuses the message, for good, when the subject
    /// already holds one.
    public func publish(
        subject: String, payload: [UInt8], headers: [String: String] = [:], messageID: String, onlyIfSubjectIsEmpty: Bool
    ) async throws(NATSError) -> PublishOutcome {
        let operation = "publish on \"\(subject)\""
        return try await perform(operation) { handles throws(NATSError) in
            var options = jsPubOptions()
            jsPubOptions_Init(&options)
            options.ExpectNoMessage = onlyIfSubjectIsEmpty
            let result: Result<PublishOutcome, NATSError> = messageID.withCString { id in
                options.MsgId = id
                var acknowledgement: UnsafeMutablePointer<jsPubAck>?
                var serverError = jsErrCode(rawValue: 0)
                var message: OpaquePointer?
                var status = payload.withUnsafeBytes {
                    natsMsg_Create(&message, subject, nil, $0.baseAddress?.assumingMemoryBound(to: CChar.self), Int32($0.count))
                }
                defer { natsMsg_Destroy(message) }
                for (name, value) in headers.sorted(by: { $0.key < $1.key }) where status == NATS_OK {
                    status = natsMsgHeader_Set(message, name, value)
                }
                if status == NATS_OK { status = js_PublishMsg(&acknowledgement, handles.jetStream, message, &options, &serverError) }
                defer { jsPubAck_Destroy(acknowledgement) }
                if status == NATS_OK, let acknowledgement {
                    return .success(acknowledgement.pointee.Duplicate ? .duplicate : .stored(sequence: acknowledgement.pointee.Sequence))
                }
                let error = NATSError(status: status, operation: operation, serverError: serverError)
                // A subject that already holds a message answers "wrong last sequence".
                if error.code == .conflict, onlyIfSubjectIsEmpty { return .success(.duplicate) }
                return .failure(error)
            }
            return try result.get()
        }
    }

    /// The last message on `subject` in `stream`, or nil if it has none.
    /// Read with a direct get, which any replica answers, not only the stream's leader.
    public func lastMessage(stream: String, subject: String) async throws(NATSError) -> Message? {
        let operation = "read the last message on \"\(subject)\" from stream \"\(stream)\""
        return try await perform(operation) { handles throws(NATSError) in
            let result: Result<Message?, NATSError> = subject.withCString { subjectPointer in
                var options = jsDirectGetMsgOptions()
                jsDirectGetMsgOptions_Init(&options)
                options.LastBySubject = subjectPointer
                var message: OpaquePointer?
                let status = js_DirectGetMsg(&message, handles.jetStream, stream, nil, &options)
                defer { natsMsg_Destroy(message) }
                if status == NATS_NOT_FOUND { return .success(nil) }
                guard status == NATS_OK, let message else { return .failure(NATSError(status: status, operation: operation)) }
                return .success(Self.copy(message))
            }
            return try result.get()
        }
    }

    /// Removes every message on `subject` (wildcards allowed) from `stream`.
    public func purge(stream: String, subject: String) async throws(NATSError) {
        let operation = "purge \"\(subject)\" from stream \"\(stream)\""
        try await perform(operation) { handles throws(NATSError) in
            let status = subject.withCString { subject in
                var options = jsOptions()
                jsOptions_Init(&options)
                options.Stream.Purge.Subject = subject
                return js_PurgeStream(handles.jetStream, stream, &options, nil)
            }
            guard status == NATS_OK else { throw NATSError(status: status, operation: operation) }
        }
    }

    /// Every message published on `subject` (wildcards allowed) from now on, as long as the
    /// stream is iterated. The server knows of the subscription when this returns, if connected;
    /// messages published while the connection is down are not delivered.
    public func subscribe(to subject: String) async -> AsyncStream<Message> {
        let source = BlockingSource<Message>(
            reopenAfterReconnect: false,
            open: { [handles] () throws(NATSError) -> UnsafeHandle in
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
        return Message(subject: String(cString: natsMsg_GetSubject(message)), payload: payload(of: message), headers: headers)
    }

    static func payload(of message: OpaquePointer) -> [UInt8] {
        let length = Int(natsMsg_GetDataLength(message))
        guard length > 0, let data = natsMsg_GetData(message) else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }
}
