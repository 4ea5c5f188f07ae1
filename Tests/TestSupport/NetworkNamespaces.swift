import Foundation

/// Hosts for a test that crosses a network: network namespaces (`ip netns`, from Debian's
/// iproute2), each joined by a veth pair to a bridge in the test's own namespace, which holds
/// the last address of the subnet. A link between two hosts is cut with a blackhole route on
/// each side, so both still reach the test's namespace (where the clients run) while they cannot
/// reach each other. Needs root (CI runs as root); everything is removed when released.
public final class NetworkNamespaces: Sendable {
    /// The namespaces' names, one per host.
    public let names: [String]
    /// Each host's address, in the order of `names`.
    public let addresses: [String]
    private let bridge: String
    private let links: [String]

    /// Whether this process may make namespaces (root, with iproute2), and if not, why.
    public static let unavailableReason: String? = {
        guard getuid() == 0 else { return "network namespaces need root (CI runs the tests as root)" }
        guard ip else { return "no ip command (Debian's iproute2)" }
        let probe = "feedd-probe-\(getpid())"
        guard (try? run(["netns", "add", probe])) != nil else { return "ip netns add failed: namespaces are not allowed here" }
        try? run(["netns", "del", probe])
        return nil
    }()

    private static var ip: Bool { FileManager.default.isExecutableFile(atPath: command) }
    static let command = ["/usr/sbin/ip", "/usr/bin/ip", "/sbin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/ip"

    /// Makes `count` hosts on a subnet of their own.
    public init(count: Int) throws {
        let tag = String(getpid() % 10_000) + String(Int.random(in: 0..<100))
        let subnet = "10.\(200 + Int.random(in: 0..<50)).\(Int.random(in: 0..<250))"
        names = (1...count).map { "feedd-\(tag)-\($0)" }
        addresses = (1...count).map { "\(subnet).\($0)" }
        bridge = "fdb\(tag)"
        links = (1...count).map { "fd\(tag)h\($0)" }
        try Self.run(["link", "add", bridge, "type", "bridge"])
        try Self.run(["addr", "add", "\(subnet).254/24", "dev", bridge])
        try Self.run(["link", "set", bridge, "up"])
        for (index, name) in names.enumerated() {
            let outside = links[index]
            let inside = "\(outside)i"
            try Self.run(["netns", "add", name])
            try Self.run(["link", "add", outside, "type", "veth", "peer", "name", inside])
            try Self.run(["link", "set", inside, "netns", name])
            try Self.run(["link", "set", outside, "master", bridge, "up"])
            try Self.run(["-n", name, "addr", "add", "\(addresses[index])/24", "dev", inside])
            try Self.run(["-n", name, "link", "set", inside, "up"])
            try Self.run(["-n", name, "link", "set", "lo", "up"])
        }
    }

    deinit {
        for name in names { try? Self.run(["netns", "del", name]) }
        try? Self.run(["link", "del", bridge])
    }

    /// Cuts the link between hosts `first` and `second` (indices), both ways.
    public func cut(_ first: Int, _ second: Int) throws {
        try Self.run(["-n", names[first], "route", "add", "blackhole", "\(addresses[second])/32"])
        try Self.run(["-n", names[second], "route", "add", "blackhole", "\(addresses[first])/32"])
    }

    /// Cuts host `host` off from every other host (the test's namespace still reaches it).
    public func isolate(_ host: Int) throws {
        for other in names.indices where other != host { try cut(host, other) }
    }

    /// Restores every link between the hosts.
    public func heal() throws {
        for (index, name) in names.enumerated() {
            for other in addresses.indices where other != index {
                try? Self.run(["-n", name, "route", "del", "blackhole", "\(addresses[other])/32"])
            }
        }
    }

    static func run(_ arguments: [String]) throws {
        let (status, _, errors) = try ChildProcess.run(command, arguments)
        guard status == 0 else { throw TestFailure("ip \(arguments.joined(separator: " ")): \(errors)") }
    }
}
