import CMicroHTTPD
import FeedKit
import FeedServer
import Foundation
import Glibc

/// What libmicrohttpd's calls become: requests for the front to answer, and connections to count.
@MainActor
protocol HTTPRequestHandler: AnyObject {
    /// The request's header is in. Answering now refuses it (too many clients, a header too
    /// long) without reading its body.
    func requestBegan(_ exchange: HTTPExchange)
    /// The request is complete, its body received: answer it, now or later.
    func requestArrived(_ exchange: HTTPExchange)
    /// The longest request body taken.
    var maxBodyBytes: Int { get }
}

/// One libmicrohttpd daemon serving one listening socket from the daemon's event loop.
///
/// The daemon runs with `MHD_USE_EPOLL` and no thread of its own: its epoll descriptor is
/// watched by the ``EventLoop``, and `MHD_run` is called when it is readable and when the
/// timeout `MHD_get_timeout` names comes (an idle connection to close, or connections with work
/// left). Every callback therefore runs on the main thread, inside `MHD_run`, where the engine
/// is: the front calls the engine directly and never blocks, since a request that must wait is
/// suspended (`MHD_ALLOW_SUSPEND_RESUME`) and resumed when its answer is ready.
@MainActor
final class MicroHTTPDaemon {
    /// Limits libmicrohttpd enforces itself.
    struct Limits {
        /// Connections libmicrohttpd accepts at most; the front answers 429 past its own, lower, limit.
        var connections: Int
        /// An idle or stalled connection is closed after this long.
        var timeoutSeconds: Int
        /// Each connection's memory for its request header and answer buffer.
        var connectionMemory: Int
    }

    private var daemon: OpaquePointer?
    let loop: EventLoop
    private var watch: EventLoop.ReadableWatch?
    /// The timer that runs libmicrohttpd at the deadline it asked for, and that deadline.
    private var timer: (timer: EventLoop.ScheduledTimer, deadline: ContinuousClock.Instant)?
    private weak var handler: (any HTTPRequestHandler)?
    private let counters: HTTPCounters
    private let logger: Logger
    /// libmicrohttpd's messages while it starts, for the error if it cannot.
    private var startMessages: [String]? = []
    private var isRunning = false
    /// Whether a run at the end of the turn is due (``runSoon()``).
    private var isRunDue = false
    /// Whether the listener is TCP, whose connections get a fixed send buffer (``sendBufferBytes``).
    private let fixesSendBuffer: Bool
    /// The listening socket, and the descriptors no client may take (read at start, after the
    /// daemon raised its limit).
    private let listener: Int32
    private let descriptorReserve = DescriptorReserve.current()
    private var isRefusingForDescriptors = false
    let name: String

    /// Starts serving `listener`, a listening stream socket this daemon now owns (`isTCP` if it
    /// listens on TCP, not on a Unix socket).
    init(
        name: String, listener: Int32, isTCP: Bool, limits: Limits, tls: (certificate: String, key: [UInt8])?, handler: any HTTPRequestHandler,
        counters: HTTPCounters, logger: Logger, loop: EventLoop
    ) throws(HTTPStartError) {
        self.name = name
        self.loop = loop
        self.handler = handler
        self.counters = counters
        self.logger = logger
        fixesSendBuffer = isTCP
        var flags = MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
        if tls != nil {
            guard MHD_is_feature_supported(.FEATURE_TLS) == .YES else {
                throw HTTPStartError("\(name): this libmicrohttpd was built without TLS")
            }
            flags |= MHD_USE_TLS.rawValue
        }
        // A socket systemd passed is blocking; libmicrohttpd's accept must never wait.
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        _ = fcntl(listener, F_SETFD, FD_CLOEXEC)
        self.listener = listener
        let context = Unmanaged.passUnretained(self).toOpaque()
        let started: OpaquePointer? = withOptionalCString(tls?.certificate) { certificate in
            withOptionalCString(tls.map { String(decoding: $0.key, as: UTF8.self) }) { key in
                var options = feedd_http_options(
                    listen_socket: listener, connection_limit: UInt32(limits.connections), connection_timeout_seconds: UInt32(limits.timeoutSeconds),
                    connection_memory_limit: limits.connectionMemory, tls_key: key, tls_certificate: certificate,
                    request_completed: Self.requestCompleted, connection_notified: Self.connectionNotified, log: Self.log,
                    accept_policy: Self.admits, context: context)
                return feedd_http_start(flags, Self.access, &options)
            }
        }
        let messages = startMessages ?? []
        startMessages = nil
        guard let started else {
            close(listener)
            throw HTTPStartError("\(name): libmicrohttpd would not start" + (messages.isEmpty ? "" : ": " + messages.joined(separator: "; ")))
        }
        daemon = started
        let epoll = feedd_http_epoll_descriptor(started)
        watch = loop.watchReadable(epoll) { [unowned self] in self.run() }
    }

    /// Runs libmicrohttpd until it has nothing more to do now, then sets the timer for when it next must.
    private func run() {
        guard let daemon, !isRunning else { return }
        isRunning = true
        MHD_run(daemon)
        isRunning = false
        var milliseconds: UInt64 = 0
        guard MHD_get_timeout(daemon, &milliseconds) == .YES else { return }
        let deadline = ContinuousClock.now + .milliseconds(Int64(min(milliseconds, 86_400_000)))
        // A timer due no later stays: it runs libmicrohttpd, which asks again then.
        if let timer, timer.deadline <= deadline { return }
        if let timer { loop.cancel(timer.timer) }
        let scheduled = loop.scheduleTimer(after: deadline - .now) { [weak self] in
            self?.timer = nil
            self?.run()
        }
        timer = (scheduled, deadline)
    }

    /// Runs libmicrohttpd once the loop's turn is over: a connection was resumed. (Run from the
    /// event loop, libmicrohttpd has no wake-up descriptor of its own: `MHD_run` must follow
    /// `MHD_resume_connection`, and a resume during `MHD_run` is only seen by the next one.)
    /// Run then, the answers and events of the turn are written before the fetch a feed deferred
    /// to the end of the same turn starts, since the feed defers it after delivering them.
    func runSoon() {
        guard !isRunDue else { return }
        isRunDue = true
        loop.afterTurn { [weak self] in
            guard let self else { return }
            isRunDue = false
            run()
        }
    }

    // MARK: libmicrohttpd's callbacks

    private static func daemon(_ context: UnsafeMutableRawPointer?) -> MicroHTTPDaemon {
        Unmanaged<MicroHTTPDaemon>.fromOpaque(context!).takeUnretainedValue()
    }

    // libmicrohttpd calls back only from inside `MHD_run`, which ``run()`` calls on the main
    // actor; the pointers it passes are valid for the call.
    private static let access: MHD_AccessHandlerCallback = { context, connection, url, method, version, uploadData, uploadSize, requestContext in
        nonisolated(unsafe) let call = (context, connection!, url, method, version, uploadData, uploadSize!, requestContext!)
        return MainActor.assumeIsolated {
            daemon(call.0).access(
                connection: call.1, url: call.2, method: call.3, version: call.4, uploadData: call.5, uploadSize: call.6, requestContext: call.7)
        }
    }

    private func access(
        connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?,
        uploadData: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>, requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let handler else { return .NO }
        guard let stored = requestContext.pointee else {
            let exchange = HTTPExchange(
                connection: connection, method: method.map { String(cString: $0) } ?? "GET", path: url.map { String(cString: $0) } ?? "/",
                isHTTP10: version.map { strcmp($0, MHD_HTTP_VERSION_1_0) == 0 } ?? false, daemon: self, counters: counters)
            // Released when libmicrohttpd says the request is over.
            requestContext.pointee = Unmanaged.passRetained(exchange).toOpaque()
            exchange.duringCall(receivingBody: false) { handler.requestBegan(exchange) }
            return .YES
        }
        let exchange = Unmanaged<HTTPExchange>.fromOpaque(stored).takeUnretainedValue()
        if uploadSize.pointee > 0, let uploadData {
            let limit = handler.maxBodyBytes
            exchange.duringCall(receivingBody: true) { exchange.receive(UnsafeRawBufferPointer(start: uploadData, count: uploadSize.pointee), limit: limit) }
            uploadSize.pointee = 0
            return .YES
        }
        exchange.duringCall(receivingBody: false) {
            guard exchange.state == .receiving else { return }
            exchange.requestCompleted()
            handler.requestArrived(exchange)
        }
        return .YES
    }

    private static let requestCompleted: MHD_RequestCompletedCallback = { _, _, requestContext, termination in
        nonisolated(unsafe) let requestContext = requestContext
        MainActor.assumeIsolated {
            guard let requestContext, let stored = requestContext.pointee else { return }
            requestContext.pointee = nil
            let exchange = Unmanaged<HTTPExchange>.fromOpaque(stored).takeRetainedValue()
            exchange.finish(sentCompletely: termination == .REQUEST_TERMINATED_COMPLETED_OK)
        }
    }

    /// The kernel's send buffer of each TCP connection. A fixed size turns off its autotuning,
    /// which lets the buffer of a client that does not read grow to megabytes (tcp_wmem): that
    /// client would take that much of the stream before it stopped advancing. A Unix socket's is
    /// left as it is: it is not autotuned, its default (net.core.wmem_default, 208 KiB) is what
    /// the socket front's connections have, and it is all that bounds what the peer has not read
    /// (the kernel charges every unread write, with its overhead, to the sender), so at the 128
    /// KiB this asks for an event stream would stall after a few pages.
    static let sendBufferBytes: Int32 = 64 << 10

    private static let connectionNotified: MHD_NotifyConnectionCallback = { context, connection, _, event in
        nonisolated(unsafe) let call = (context, connection)
        MainActor.assumeIsolated {
            let daemon = daemon(call.0)
            let counters = daemon.counters
            if event == .CONNECTION_NOTIFY_STARTED {
                counters.connections += 1
                counters.connectionsAccepted += 1
                if daemon.fixesSendBuffer, let connection = call.1 {
                    var size = sendBufferBytes
                    _ = setsockopt(feedd_http_connection_descriptor(connection), SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
                }
            } else {
                counters.connections -= 1
            }
        }
    }

    /// An accepted connection is kept only while the descriptors clients may not take
    /// (``DescriptorReserve``) are still free: otherwise it is closed at once, and logged once
    /// until one is kept again.
    private static let admits: MHD_AcceptPolicyCallback = { context, _, _ in
        nonisolated(unsafe) let context = context
        return MainActor.assumeIsolated {
            let daemon = daemon(context)
            guard daemon.descriptorReserve.hasRoomBelowLine(duplicating: daemon.listener) else {
                if !daemon.isRefusingForDescriptors {
                    daemon.isRefusingForDescriptors = true
                    daemon.logger.error(
                        "http \(daemon.name): out of file descriptors for clients (\(daemon.descriptorReserve.explanation)): "
                            + "closing new connections until one leaves (raise LimitNOFILE= or lower max_clients)")
                }
                return .NO
            }
            daemon.isRefusingForDescriptors = false
            return .YES
        }
    }

    private static let log: MHD_LogCallback = { context, format, arguments in
        var line = [CChar](repeating: 0, count: 512)
        guard let arguments else { return }
        _ = vsnprintf(&line, line.count, format, arguments)
        let text = String(decoding: line.prefix { $0 != 0 }.map(UInt8.init(bitPattern:)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        nonisolated(unsafe) let context = context
        MainActor.assumeIsolated {
            let daemon = daemon(context)
            if daemon.startMessages != nil {
                daemon.startMessages?.append(text)
            } else {
                // Mostly what clients did wrong (a TLS handshake, a malformed request): not the operator's business.
                daemon.logger.debug("http \(daemon.name): \(text)")
            }
        }
    }
}

/// Why the HTTP front could not start.
public struct HTTPStartError: Error, CustomStringConvertible {
    /// What failed and where: the listener, and the reason.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

private func withOptionalCString<Result>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> Result) -> Result {
    guard let text else { return body(nil) }
    return text.withCString(body)
}
