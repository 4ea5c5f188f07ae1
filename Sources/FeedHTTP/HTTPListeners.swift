import FeedEngine
import FeedServer
import Glibc

/// A listening socket for the HTTP front: bound here from `[http] listen`, or passed by systemd.
public struct HTTPListener: Sendable {
    /// A listening stream socket, which the front owns once it starts.
    public let descriptor: Int32
    /// What it listens on, for the log: `127.0.0.1:8080`, a path, or `fd 4 (systemd)`.
    public let name: String

    /// A socket bound elsewhere (passed by systemd).
    public init(descriptor: Int32, name: String) {
        self.descriptor = descriptor
        self.name = name
    }

    /// Binds and listens on `address`. A Unix socket gets `mode` and `group`, like the daemon's
    /// own socket, and a stale socket file there is replaced, a live one never.
    public static func bind(_ address: HTTPListenAddress, mode: mode_t, group: gid_t?) throws(HTTPStartError) -> HTTPListener {
        switch address {
        case .unix(let path):
            do {
                return HTTPListener(descriptor: try UnixSocket.listen(path: path, mode: mode, group: group, createDirectory: false), name: path)
            } catch {
                throw HTTPStartError("cannot listen on \(path) for HTTP: \(error)")
            }
        case .tcp(let host, let port):
            return HTTPListener(descriptor: try bindTCP(host: host, port: port, name: address.description), name: address.description)
        }
    }

    private static func bindTCP(host: String, port: UInt16, name: String) throws(HTTPStartError) -> Int32 {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw HTTPStartError("cannot listen on \(name) for HTTP: \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }
        var reason = "no address"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let address = candidate {
            candidate = address.pointee.ai_next
            let descriptor = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else {
                reason = String(cString: strerror(errno))
                continue
            }
            var on: Int32 = 1
            _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            // `[::]:8080` is IPv6 only; list `0.0.0.0:8080` too for both.
            if address.pointee.ai_family == AF_INET6 {
                _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
            }
            if Glibc.bind(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0, listen(descriptor, 4096) == 0 {
                return descriptor
            }
            reason = String(cString: strerror(errno))
            close(descriptor)
        }
        throw HTTPStartError("cannot listen on \(name) for HTTP: \(reason)")
    }

    /// The port a TCP listener is bound to (for `:0` in tests), or nil for a Unix socket.
    public var port: UInt16? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let found = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) == 0 }
        }
        guard found else { return nil }
        return withUnsafePointer(to: &address) { pointer -> UInt16? in
            switch Int32(pointer.pointee.ss_family) {
            case AF_INET: pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            case AF_INET6: pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            default: nil
            }
        }
    }
}
