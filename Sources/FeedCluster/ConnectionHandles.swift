import CNATS
import Foundation

/// A libnats handle carried across threads.
///
/// `@unchecked Sendable` because libnats documents its connection, JetStream context and
/// key-value store objects as safe to use from any thread; watchers and subscriptions, which
/// are not, are only ever touched by the one ``StreamPump`` thread that owns them.
struct UnsafeHandle: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
    }
}

/// The connection and its JetStream context. See ``UnsafeHandle`` for why they may cross threads.
final class ConnectionHandles: @unchecked Sendable {
    let connection: OpaquePointer
    let jetStream: OpaquePointer
    /// In milliseconds, for the calls that take their own timeout.
    let requestTimeout: Int64

    private init(connection: OpaquePointer, jetStream: OpaquePointer, requestTimeout: Int64) {
        self.connection = connection
        self.jetStream = jetStream
        self.requestTimeout = requestTimeout
    }

    /// Builds libnats's options and makes one attempt to connect to each server; blocks up to the
    /// connect timeout per server. Once connected, libnats reconnects by itself, forever; a
    /// failed attempt throws (telling an unreachable cluster from a refusal) and is retried by
    /// the caller, so that each attempt's reason is known, which libnats's own retrying keeps to itself.
    static func connect(_ options: NATSClient.Options, secrets: ConnectionSecrets, events: ConnectionEvents) throws(NATSError) -> ConnectionHandles {
        let operation = "connect to \(options.servers.map(NATSClient.redacted).joined(separator: ", "))"
        var natsOptions: OpaquePointer?
        var status = natsOptions_Create(&natsOptions)
        guard status == NATS_OK, let natsOptions else { throw NATSError(status: status, operation: operation) }
        defer { natsOptions_Destroy(natsOptions) }

        // The callbacks reach `events` through an unretained pointer that is retained here and
        // released by the closed callback, which libnats promises is the last one it makes.
        let closure = Unmanaged.passRetained(events).toOpaque()
        let isSecure = isSecure(options, secrets)
        status = configure(natsOptions, options, secrets, closure: closure)

        var connection: OpaquePointer?
        if status == NATS_OK { status = natsConnection_Connect(&connection, natsOptions) }
        guard status == NATS_OK, let connection else {
            var error = NATSError(status: status, operation: operation)
            // With TLS 1.3 the client finishes its handshake before the server has checked the
            // client's certificate; a server that refuses it just closes the connection, which
            // the client sees as the server's first answer missing.
            if isSecure, status == NATS_PROTOCOL_ERROR || error.code == .unavailable, error.reason.contains("Expected") || error.reason.hasPrefix("SSL") {
                error = NATSError(.tls, operation: operation, reason: "the server closed the TLS connection at once; does it require a client certificate (tls_cert, tls_key) it trusts? (\(error.reason))")
            }
            // No connection, so no closed callback will ever release `events`.
            Unmanaged<ConnectionEvents>.fromOpaque(closure).release()
            throw error
        }

        var jetStreamOptions = jsOptions()
        jsOptions_Init(&jetStreamOptions)
        jetStreamOptions.Wait = options.requestTimeout.milliseconds
        var jetStream: OpaquePointer?
        status = natsConnection_JetStream(&jetStream, connection, &jetStreamOptions)
        guard status == NATS_OK, let jetStream else {
            let error = NATSError(status: status, operation: "open JetStream")
            natsConnection_Destroy(connection)
            throw error
        }
        return ConnectionHandles(connection: connection, jetStream: jetStream, requestTimeout: options.requestTimeout.milliseconds)
    }

    /// libnats 3.4 reads no meaning into a `tls://` scheme: without `natsOptions_SetSecure` it
    /// would fall back to plain text with any server that does not demand TLS.
    private static func isSecure(_ options: NATSClient.Options, _ secrets: ConnectionSecrets) -> Bool {
        !secrets.tls.isEmpty || options.servers.contains(where: { $0.lowercased().hasPrefix("tls://") })
    }

    /// Sets `options` and `secrets` on libnats's options, and the callbacks that tell `closure`'s events.
    private static func configure(
        _ natsOptions: OpaquePointer, _ options: NATSClient.Options, _ secrets: ConnectionSecrets, closure: UnsafeMutableRawPointer
    ) -> natsStatus {
        var steps: [() -> natsStatus] = [
            { withCStrings(options.servers) { natsOptions_SetServers(natsOptions, $0, Int32(options.servers.count)) } },
            { natsOptions_SetName(natsOptions, options.name) },
            { natsOptions_SetTimeout(natsOptions, options.requestTimeout.milliseconds) },
            // Never give up on the cluster once reached: the instance degrades and rejoins.
            { natsOptions_SetMaxReconnect(natsOptions, -1) },
            { natsOptions_SetReconnectWait(natsOptions, options.reconnectWait.milliseconds) },
            { natsOptions_SetPingInterval(natsOptions, options.pingInterval.milliseconds) },
            { natsOptions_SetMaxPingsOut(natsOptions, 2) },
            { natsOptions_SetReconnectedCB(natsOptions, { connection, closure in ConnectionEvents.from(closure).connected(to: connectedServerURL(of: connection)) }, closure) },
            { natsOptions_SetDisconnectedCB(natsOptions, { connection, closure in ConnectionEvents.from(closure).disconnected(reason: lastError(of: connection)) }, closure) },
            { natsOptions_SetErrorHandler(natsOptions, { _, _, status, closure in ConnectionEvents.from(closure).asynchronousError(status) }, closure) },
            {
                natsOptions_SetClosedCB(
                    natsOptions,
                    { connection, closure in
                        ConnectionEvents.from(closure).closedByLibrary(reason: lastError(of: connection))
                        Unmanaged<ConnectionEvents>.fromOpaque(closure!).release()
                    }, closure)
            },
        ]
        if isSecure(options, secrets) { steps.append { natsOptions_SetSecure(natsOptions, true) } }
        steps.append { secrets.apply(to: natsOptions) }
        var status = NATS_OK
        for step in steps where status == NATS_OK { status = step() }
        return status
    }

    /// The URL of the server the connection is on, without credentials.
    var serverURL: String { FeedCluster.connectedServerURL(of: connection) }

    /// Closes the connection and frees both handles; blocks while libnats flushes.
    func destroy() {
        jsCtx_Destroy(jetStream)
        natsConnection_Close(connection)
        natsConnection_Destroy(connection)
    }
}

extension Duration {
    /// Whole milliseconds, as libnats's options take them.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

/// The URL of the server `connection` is connected to, without credentials.
func connectedServerURL(of connection: OpaquePointer?) -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard natsConnection_GetConnectedUrl(connection, &buffer, buffer.count) == NATS_OK else { return "?" }
    return NATSClient.redacted(text(of: buffer))
}

/// The text in a C buffer, up to its first NUL.
func text(of buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// libnats's words for the connection's last error, such as `Stale Connection`.
private func lastError(of connection: OpaquePointer?) -> String {
    var text: UnsafePointer<CChar>?
    let status = natsConnection_GetLastError(connection, &text)
    if let text, text.pointee != 0 { return String(cString: text) }
    return status == NATS_OK ? "the server closed the connection" : String(cString: natsStatus_GetText(status))
}

/// Calls `body` with a C array of C strings that live as long as the call.
func withCStrings<Result>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>) -> Result) -> Result {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    var pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
}
