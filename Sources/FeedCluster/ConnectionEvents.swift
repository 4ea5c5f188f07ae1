import CNATS
import FeedKit

/// Whether the client can reach the cluster.
public enum ConnectionState: Sendable, Equatable, CustomStringConvertible {
    /// Not (or no longer) connected; the client is trying again in the background.
    case disconnected
    case connected
    /// ``NATSClient/close()`` was called, or libnats gave up; nothing will reconnect.
    case closed

    public var description: String {
        switch self {
        case .disconnected: "disconnected"
        case .connected: "connected"
        case .closed: "closed"
        }
    }
}

/// What happened to the connection, for the operator: ``NATSClient/reports()``.
public enum ConnectionReport: Sendable {
    /// Connected for the first time, to `server` (its URL without credentials).
    case connected(server: String)
    /// The connection was lost (`reason`, libnats's words); reconnecting in the background.
    case lost(reason: String)
    /// Connected again, to `server`, after an outage of `outage`.
    case restored(server: String, outage: Duration)
    /// An attempt to connect failed; the error's code says whether the servers could not be
    /// reached or refused this client (authentication, TLS).
    case attemptFailed(NATSError)
    /// A server refused an operation of this client (a permissions violation).
    case refused(NATSError)
    /// libnats gave up (a server refused the credentials twice in a row): `reason`.
    case gaveUp(reason: String)
}

/// The connection state as libnats's callbacks report it, fanned out to every
/// ``NATSClient/states()`` and ``NATSClient/reports()`` stream.
final class ConnectionEvents: Sendable {
    private struct State {
        var state = ConnectionState.disconnected
        /// How many times the connection was (re)established, so pumps know to reopen.
        var connections = 0
        var lostAt: ContinuousClock.Instant?
        /// libnats lost the first connection before the thread that made it said it was up.
        var lostBeforeFirst = false
        /// Why the last attempt to connect failed, until one succeeds: told to each new reports listener.
        var lastAttemptFailure: NATSError?
        /// The server of the connection up now, told to each new reports listener.
        var server: String?
        var nextListener = 0
        var stateListeners: [Int: AsyncStream<ConnectionState>.Continuation] = [:]
        var reportListeners: [Int: AsyncStream<ConnectionReport>.Continuation] = [:]
    }

    private let current = Locked(State())

    static func from(_ closure: UnsafeMutableRawPointer?) -> ConnectionEvents {
        Unmanaged<ConnectionEvents>.fromOpaque(closure!).takeUnretainedValue()
    }

    var state: ConnectionState { current.withLock { $0.state } }
    var connections: Int { current.withLock { $0.connections } }
    /// Connections made again after one was lost.
    var reconnections: Int { current.withLock { max(0, $0.connections - 1) } }

    func subscribe() -> AsyncStream<ConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(of: ConnectionState.self, bufferingPolicy: .bufferingNewest(16))
        let id = current.withLock { state in
            state.nextListener += 1
            state.stateListeners[state.nextListener] = continuation
            continuation.yield(state.state)
            if state.state == .closed { continuation.finish() }
            return state.nextListener
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.current.withLock { $0.stateListeners.removeValue(forKey: id) }
        }
        return stream
    }

    func subscribeToReports() -> AsyncStream<ConnectionReport> {
        let (stream, continuation) = AsyncStream.makeStream(of: ConnectionReport.self, bufferingPolicy: .bufferingNewest(64))
        let id = current.withLock { state in
            state.nextListener += 1
            state.reportListeners[state.nextListener] = continuation
            // A new listener learns where things stand first.
            if let failure = state.lastAttemptFailure, state.state == .disconnected { continuation.yield(.attemptFailed(failure)) }
            if let server = state.server, state.state == .connected { continuation.yield(.connected(server: server)) }
            if state.state == .closed { continuation.finish() }
            return state.nextListener
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.current.withLock { $0.reportListeners.removeValue(forKey: id) }
        }
        return stream
    }

    /// The connection is up, to `server`: the first time, or again after an outage.
    func connected(to server: String) {
        current.withLock { state in
            guard state.state != .closed, !(state.connections == 0 && state.lostBeforeFirst) else {
                state.lostBeforeFirst = false
                return
            }
            state.connections += 1
            let report: ConnectionReport =
                if state.connections == 1 { .connected(server: server) } else { .restored(server: server, outage: .now - (state.lostAt ?? .now)) }
            state.lostAt = nil
            state.lastAttemptFailure = nil
            state.server = server
            Self.change(&state, to: .connected)
            for listener in state.reportListeners.values { listener.yield(report) }
        }
    }

    func disconnected(reason: String) {
        current.withLock { state in
            guard state.state == .connected else {
                if state.connections == 0 { state.lostBeforeFirst = true }
                return
            }
            state.lostAt = .now
            Self.change(&state, to: .disconnected)
            for listener in state.reportListeners.values { listener.yield(.lost(reason: reason)) }
        }
    }

    func report(_ report: ConnectionReport) {
        current.withLock { state in
            if case .attemptFailed(let failure) = report { state.lastAttemptFailure = failure }
            for listener in state.reportListeners.values { listener.yield(report) }
        }
    }

    /// libnats's error callback: a permissions violation or a refused reconnection are worth
    /// telling; a slow subscription is not (its pump reads on).
    func asynchronousError(_ status: natsStatus) {
        switch status {
        case NATS_NOT_PERMITTED: report(.refused(NATSError(status: status, operation: "an operation on the NATS cluster")))
        case NATS_CONNECTION_AUTH_FAILED: report(.attemptFailed(NATSError(status: status, operation: "reconnect to the NATS cluster")))
        default: break
        }
    }

    /// libnats closed the connection on its own: it does so only when it gives up reconnecting.
    func closedByLibrary(reason: String) {
        guard state != .closed else { return }
        report(.gaveUp(reason: reason))
        closed()
    }

    func closed() {
        let (states, reports) = current.withLock { state in
            Self.change(&state, to: .closed)
            defer {
                state.stateListeners.removeAll()
                state.reportListeners.removeAll()
            }
            return (Array(state.stateListeners.values), Array(state.reportListeners.values))
        }
        // Outside the lock: finishing a stream runs its termination handler, which takes it.
        for listener in states { listener.finish() }
        for listener in reports { listener.finish() }
    }

    private static func change(_ state: inout State, to new: ConnectionState) {
        guard state.state != new, state.state != .closed else { return }
        state.state = new
        for listener in state.stateListeners.values { listener.yield(new) }
    }
}
