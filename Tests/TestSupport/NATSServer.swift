import FeedKit
import Foundation

/// A real `nats-server` (Debian installs it in /usr/sbin) with JetStream for a test, on a free loopback port, storing in a
/// temporary directory; no root needed. It can be stopped, restarted on the same port and store,
/// frozen with SIGSTOP, and killed with SIGKILL. Killed when released.
///
/// A test may give it a configuration file's text (authentication, TLS, accounts and
/// permissions); the command line still sets its port, store, name and routes. A server may
/// also run in a network namespace a test made, listening on that namespace's address.
public final class NATSServer: Sendable {
    /// The routes of a JetStream cluster this server belongs to.
    public struct Cluster: Sendable {
        public let name: String
        public let routeHost: String
        public let routePort: Int
        /// `host:port` of every other server's routes.
        public let peerRoutes: [String]
    }

    public let name: String
    public let host: String
    public let port: Int
    public let cluster: Cluster?
    /// The network namespace it runs in (`ip netns exec`), if not the test's own.
    public let namespace: String?
    private let configuration: String?
    /// Variables the configuration file may name (`password: $FEEDD_PASSWORD`).
    private let environment: [String: String]
    private let directory: TemporaryDirectory
    private let running = Locked<(process: Process, log: LogCollector)?>(nil)

    /// Starts a single JetStream server on `port` (a free one if nil), with `configuration` as
    /// its configuration file if given (and `environment` for the variables it names); returns
    /// once it accepts clients.
    public convenience init(port: Int? = nil, configuration: String? = nil, environment: [String: String] = [:]) throws {
        try self.init(
            name: "nats-1", host: "127.0.0.1", port: try port ?? Self.freePort(), cluster: nil, configuration: configuration, namespace: nil,
            environment: environment)
    }

    private init(
        name: String, host: String, port: Int, cluster: Cluster?, configuration: String?, namespace: String?, environment: [String: String] = [:]
    ) throws {
        self.name = name
        self.host = host
        self.port = port
        self.cluster = cluster
        self.configuration = configuration
        self.namespace = namespace
        self.environment = environment
        directory = try TemporaryDirectory()
        try start()
    }

    /// Starts `count` servers routed to each other as one JetStream cluster; returns once each
    /// accepts clients (the cluster may still be electing its JetStream leader).
    public static func cluster(of count: Int = 3) throws -> [NATSServer] {
        let ports = try freePorts(2 * count)
        let (clientPorts, routePorts) = (Array(ports[..<count]), Array(ports[count...]))
        let servers = try (0..<count).map { index in
            let cluster = Cluster(
                name: "feedd-test", routeHost: "127.0.0.1", routePort: routePorts[index],
                peerRoutes: routePorts.enumerated().filter { $0.offset != index }.map { "127.0.0.1:\($0.element)" })
            return try NATSServer(name: "nats-\(index + 1)", host: "127.0.0.1", port: clientPorts[index], cluster: cluster, configuration: nil, namespace: nil)
        }
        return servers
    }

    /// A JetStream cluster of one server in each of `namespaces`, each listening on its address
    /// in `hosts` (clients on 4222, routes on 6222); returns once each accepts clients.
    public static func cluster(inNamespaces namespaces: [String], hosts: [String]) throws -> [NATSServer] {
        try namespaces.indices.map { index in
            let cluster = Cluster(
                name: "feedd-test", routeHost: hosts[index], routePort: 6222,
                peerRoutes: hosts.enumerated().filter { $0.offset != index }.map { "\($0.element):6222" })
            return try NATSServer(name: "nats-\(index + 1)", host: hosts[index], port: 4222, cluster: cluster, configuration: nil, namespace: namespaces[index])
        }
    }

    deinit {
        if let (process, _) = running.withLock({ $0 }), process.isRunning {
            kill(process.processIdentifier, SIGCONT)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// `nats://<host>:<port>`.
    public var url: String { "nats://\(host):\(port)" }

    /// The server's process id while it runs.
    public var pid: Int32? { running.withLock { $0?.process.isRunning == true ? $0?.process.processIdentifier : nil } }

    /// What the server logged since it was last started.
    public var log: String { running.withLock { $0?.log.text } ?? "" }

    /// Starts the server (again, after ``stop()``) with the same port and store.
    public func start() throws {
        let process = Process()
        var arguments = ["-js", "-a", host, "-p", String(port), "-sd", directory.path("jetstream"), "-n", name]
        if let cluster {
            arguments += [
                "--cluster_name", cluster.name, "--cluster", "nats://\(cluster.routeHost):\(cluster.routePort)",
                "--routes", cluster.peerRoutes.map { "nats://\($0)" }.joined(separator: ","),
            ]
        }
        if let configuration { arguments += ["-c", try directory.write("nats.conf", configuration)] }
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new } }
        if let namespace {
            // `ip netns exec` enters the namespace and execs the server: the pid is the server's.
            process.executableURL = URL(fileURLWithPath: NetworkNamespaces.command)
            process.arguments = ["netns", "exec", namespace, "/usr/sbin/nats-server"] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/nats-server")
            process.arguments = arguments
        }
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

    /// Kills the server with SIGKILL, as a crash would, and waits until it has exited.
    public func crash() {
        guard let (process, _) = running.withLock({ $0 }), process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
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
    public static func freePort() throws -> Int { try freePorts(1)[0] }

    /// `count` different loopback TCP ports that were free a moment ago. Each is held until all
    /// are found: a port given back at once may be the next one handed out, and a cluster whose
    /// client port is also a route port does not start.
    public static func freePorts(_ count: Int) throws -> [Int] {
        var descriptors: [Int32] = []
        defer { for descriptor in descriptors { close(descriptor) } }
        return try (0..<count).map { _ in
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
            descriptors.append(descriptor)
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
}
