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

    /// Builds libnats's options from `options` and connects; blocks up to the connect timeout.
    static func connect(_ options: NATSClient.Options, events: ConnectionEvents) throws(NATSError) -> ConnectionHandles {
        let operation = "connect to \(options.servers.joined(separator: ", "))"
        // libnats reads the credentials file on every connect attempt and, retrying failed
        // connects, would retry a missing file forever without a word.
        if let credentials = options.credentialsFile, access(credentials, R_OK) != 0 {
            throw NATSError(.failed, operation: operation, reason: "cannot read the credentials file \(credentials): \(String(cString: strerror(errno)))")
        }
        var natsOptions: OpaquePointer?
        var status = natsOptions_Create(&natsOptions)
        guard status == NATS_OK, let natsOptions else { throw NATSError(status: status, operation: operation) }
        defer { natsOptions_Destroy(natsOptions) }

        // The callbacks reach `events` through an unretained pointer that is retained here and
        // released by the closed callback, which libnats promises is the last one it makes.
        let closure = Unmanaged.passRetained(events).toOpaque()
        var steps: [() -> natsStatus] = [
            { withCStrings(options.servers) { natsOptions_SetServers(natsOptions, $0, Int32(options.servers.count)) } },
            { natsOptions_SetName(natsOptions, options.name) },
            { natsOptions_SetTimeout(natsOptions, options.requestTimeout.milliseconds) },
            // Never give up on the cluster, at start or later: the instance degrades and rejoins.
            { natsOptions_SetMaxReconnect(natsOptions, -1) },
            { natsOptions_SetReconnectWait(natsOptions, options.reconnectWait.milliseconds) },
            { natsOptions_SetPingInterval(natsOptions, options.pingInterval.milliseconds) },
            { natsOptions_SetMaxPingsOut(natsOptions, 2) },
            { natsOptions_SetRetryOnFailedConnect(natsOptions, true, { _, closure in ConnectionEvents.from(closure).connected() }, closure) },
            { natsOptions_SetReconnectedCB(natsOptions, { _, closure in ConnectionEvents.from(closure).connected() }, closure) },
            { natsOptions_SetDisconnectedCB(natsOptions, { _, closure in ConnectionEvents.from(closure).disconnected() }, closure) },
            {
                natsOptions_SetClosedCB(
                    natsOptions,
                    { _, closure in
                        ConnectionEvents.from(closure).closed()
                        Unmanaged<ConnectionEvents>.fromOpaque(closure!).release()
                    }, closure)
            },
        ]
        // libnats 3.4 reads no meaning into a `tls://` scheme: without this it would fall back to
        // plain text with any server that does not demand TLS.
        if options.trustedCertificatesFile != nil || options.servers.contains(where: { $0.lowercased().hasPrefix("tls://") }) {
            steps.append { natsOptions_SetSecure(natsOptions, true) }
        }
        if let credentials = options.credentialsFile {
            steps.append { natsOptions_SetUserCredentialsFromFiles(natsOptions, credentials, nil) }
        }
        if let authorities = options.trustedCertificatesFile {
            steps.append { natsOptions_LoadCATrustedCertificates(natsOptions, authorities) }
        }
        for step in steps where status == NATS_OK { status = step() }

        var connection: OpaquePointer?
        if status == NATS_OK { status = natsConnection_Connect(&connection, natsOptions) }
        guard status == NATS_OK || status == NATS_NOT_YET_CONNECTED, let connection else {
            let error = NATSError(status: status, operation: operation)
            // No connection, so no closed callback will ever release `events`.
            Unmanaged<ConnectionEvents>.fromOpaque(closure).release()
            throw error
        }
        if status == NATS_OK { events.connectedAtStart() }

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

/// Calls `body` with a C array of C strings that live as long as the call.
func withCStrings<Result>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>) -> Result) -> Result {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    var pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
}
