import FeedKit

/// Whether the client can reach the cluster.
public enum ConnectionState: Sendable, Equatable, CustomStringConvertible {
    /// Not (or no longer) connected; libnats is trying again in the background.
    case disconnected
    case connected
    /// ``NATSClient/close()`` was called; nothing will reconnect.
    case closed

    public var description: String {
        switch self {
        case .disconnected: "disconnected"
        case .connected: "connected"
        case .closed: "closed"
        }
    }
}

/// The connection state as libnats's callbacks report it, fanned out to every ``NATSClient/states()`` stream.
final class ConnectionEvents: Sendable {
    private struct State {
        var state = ConnectionState.disconnected
        /// How many times the connection was (re)established, so pumps know to reopen.
        var connections = 0
        var disconnections = 0
        var nextListener = 0
        var listeners: [Int: AsyncStream<ConnectionState>.Continuation] = [:]
    }

    private let current = Locked(State())

    static func from(_ closure: UnsafeMutableRawPointer?) -> ConnectionEvents {
        Unmanaged<ConnectionEvents>.fromOpaque(closure!).takeUnretainedValue()
    }

    var state: ConnectionState { current.withLock { $0.state } }
    var connections: Int { current.withLock { $0.connections } }

    func subscribe() -> AsyncStream<ConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(of: ConnectionState.self, bufferingPolicy: .bufferingNewest(16))
        let id = current.withLock { state in
            state.nextListener += 1
            state.listeners[state.nextListener] = continuation
            continuation.yield(state.state)
            if state.state == .closed { continuation.finish() }
            return state.nextListener
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.current.withLock { $0.listeners.removeValue(forKey: id) }
        }
        return stream
    }

    /// The first connect succeeded inside `natsConnection_Connect`, which calls no callback for it.
    /// A disconnection reported in between wins.
    func connectedAtStart() {
        current.withLock { state in
            guard state.connections == 0, state.disconnections == 0 else { return }
            Self.change(&state, to: .connected)
        }
    }

    func connected() { current.withLock { Self.change(&$0, to: .connected) } }
    func disconnected() { current.withLock { Self.change(&$0, to: .disconnected) } }

    func closed() {
        current.withLock { state in
            Self.change(&state, to: .closed)
            for listener in state.listeners.values { listener.finish() }
            state.listeners.removeAll()
        }
    }

    private static func change(_ state: inout State, to new: ConnectionState) {
        if new == .connected { state.connections += 1 }
        if new == .disconnected { state.disconnections += 1 }
        guard state.state != new, state.state != .closed else { return }
        state.state = new
        for listener in state.listeners.values { listener.yield(new) }
    }
}
