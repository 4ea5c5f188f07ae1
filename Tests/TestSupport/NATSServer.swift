import FeedKit
import Foundation

/// A real `nats-server` (Debian installs it in /usr/sbin) with JetStream for a test, on a free loopback port, storing in a
/// temporary directory; no root needed. It can be stopped, restarted on the same port and store,
/// and frozen with SIGSTOP. Killed when released.
public final class NATSServer: Sendable {
    /// The routes of a JetStream cluster this server belongs to.
    public struct Cluster: Sendable {
        public let name: String
        public let routePort: Int
        public let peerRoutePorts: [Int]
    }

    public let name: String
    public let port: Int
    public let cluster: Cluster?
    private let directory: TemporaryDirectory
    private let running = Locked<(process: Process, log: LogCollector)?>(nil)

    /// Starts a single JetStream server on `port` (a free one if nil); returns once it accepts clients.
    public convenience init(port: Int? = nil) throws {
        try self.init(name: "nats-1", port: try port ?? Self.freePort(), cluster: nil)
    }

    private init(name: String, port: Int, cluster: Cluster?) throws {
        self.name = name
        self.port = port
        self.cluster = cluster
        directory = try TemporaryDirectory()
        try start()
    }

    /// Starts `count` servers routed to each other as one JetStream cluster; returns once each
    /// accepts clients (the cluster may still be electing its JetStream leader).
    public static func cluster(of count: Int = 3) throws -> [NATSServer] {
        let clientPorts = try (0..<count).map { _ in try freePort() }
        let routePorts = try (0..<count).map { _ in try freePort() }
        let servers = try (0..<count).map { index in
            let cluster = Cluster(name: "feedd-test", routePort: routePorts[index], peerRoutePorts: routePorts.enumerated().filter { $0.offset != index }.map(\.element))
            return try NATSServer(name: "nats-\(index + 1)", port: clientPorts[index], cluster: cluster)
        }
        return servers
    }

    deinit {
        if let (process, _) = running.withLock({ $0 }), process.isRunning {
            kill(process.processIdentifier, SIGCONT)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// `nats://127.0.0.1:<port>`.
    public var url: String { "nats://127.0.0.1:\(port)" }

    /// What the server logged since it was last started.
    public var log: String { running.withLock { $0?.log.text } ?? "" }

    /// Starts the server (again, after ``stop()``) with the same port and store.
    public func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nats-server")
        var arguments = ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", directory.path("jetstream"), "-n", name]
        if let cluster {
            arguments += [
                "--cluster_name", cluster.name, "--cluster", "nats://127.0.0.1:\(cluster.routePort)",
                "--routes", cluster.peerRoutePorts.map { "nats://127.0.0.1:\($0)" }.joined(separator: ","),
            ]
        }
        process.arguments = arguments
        let log = LogCollector()
        let (_, errors) = try ChildProcess.launch(process)
        log.collect(from: errors)
        running.withLock { $0 = (process, log) }
        do {
            try log.waitForLine(containing: "Server is ready")
        } catch {
            throw TestFailure("nats-server \(name) did not start: \(error)")
        }
    }

    /// Stops the server with SIGTERM and waits until it has exited.
    public func stop() {
        guard let (process, _) = running.withLock({ $0 }), process.isRunning else { return }
        kill(process.processIdentifier, SIGCONT)
        process.terminate()
        process.waitUntilExit()
    }

    /// Freezes the server (SIGSTOP): its sockets stay open but it answers nothing.
    public func freeze() { signal(SIGSTOP) }

    /// Lets a frozen server run again (SIGCONT).
    public func thaw() { signal(SIGCONT) }

    private func signal(_ signal: Int32) {
        guard let (process, _) = running.withLock({ $0 }), process.isRunning else { return }
        kill(process.processIdentifier, signal)
    }

    /// A loopback port nothing listens on right now.
    public static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else { throw TestFailure("bind: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
