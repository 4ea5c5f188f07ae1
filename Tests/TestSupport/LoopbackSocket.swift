import Glibc

/// A plain TCP connection to a port on 127.0.0.1, for tests that hold connections open or speak
/// a protocol byte by byte.
public enum LoopbackSocket {
    /// A blocking socket connected to 127.0.0.1:`port` (closed on exec, so no daemon a test starts
    /// inherits it).
    public static func connect(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw TestFailure("connect to 127.0.0.1:\(port): \(reason)")
        }
        return descriptor
    }
}
