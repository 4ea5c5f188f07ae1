import FeedClient
import Glibc

/// A problem with the listening socket, said the way an administrator needs to read it.
public struct SocketError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// Creating and inspecting Unix stream sockets.
public enum UnixSocket {
    /// Binds and listens on `path`. A stale socket file (nobody listening) is replaced; a live one
    /// is an error, never a silent takeover; anything else at that path is left alone.
    ///
    /// The socket's directory must exist, unless `createDirectory` (for the default path under
    /// the runtime directory, made private): a directory feedd made itself would decide who may
    /// reach the socket, whatever `socket_mode` and `socket_group` say.
    public static func listen(path: String, mode: mode_t, group: gid_t?, createDirectory: Bool) throws(SocketError) -> Int32 {
        let address: UnixSocketAddress
        do {
            address = try UnixSocketAddress(path: path)
        } catch {
            throw SocketError(description: error.description)
        }
        if createDirectory {
            try createParentDirectory(of: path)
        } else {
            try requireParentDirectory(of: path)
        }
        try removeStaleSocket(at: path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(description: "cannot create a socket: \(lastError())") }
        let bound = address.withSocketAddress { bind(descriptor, $0, $1) }
        guard bound == 0 else {
            let reason = lastError()
            close(descriptor)
            throw SocketError(description: "cannot bind \(path): \(reason)")
        }
        guard chmod(path, mode) == 0 else {
            let reason = lastError()
            close(descriptor)
            throw SocketError(description: "cannot set mode \(String(mode, radix: 8)) on \(path): \(reason)")
        }
        if let group, chown(path, uid_t.max, group) != 0 {
            let reason = lastError()
            close(descriptor)
            throw SocketError(description: "cannot give \(path) to group \(group): \(reason)")
        }
        guard Glibc.listen(descriptor, 4096) == 0 else {
            let reason = lastError()
            close(descriptor)
            throw SocketError(description: "cannot listen on \(path): \(reason)")
        }
        return descriptor
    }

    /// Who is on the other end of a connected Unix socket (SO_PEERCRED).
    public static func peerCredentials(of descriptor: Int32) -> PeerCredentials? {
        // struct ucred from <sys/socket.h>, which Glibc hides behind _GNU_SOURCE: three 32-bit fields.
        var credentials = (pid: pid_t(0), uid: uid_t(0), gid: gid_t(0))
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
    }

    private static func createParentDirectory(of path: String) throws(SocketError) {
        var directory = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/").dropLast() {
            directory += component
            // A directory feedd creates itself holds only its socket: keep it private.
            defer { directory += "/" }
            if mkdir(directory, 0o700) != 0 && errno != EEXIST {
                throw SocketError(description: "cannot create directory \(directory) for the socket: \(lastError())")
            }
        }
    }

    private static func requireParentDirectory(of path: String) throws(SocketError) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw SocketError(description: "the directory \(directory) of the socket does not exist (\(lastError())); "
                + "create it with the owner and mode that should guard the socket, feedd does not")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw SocketError(description: "\(directory), where the socket \(path) should go, is not a directory")
        }
    }

    private static func removeStaleSocket(at path: String) throws(SocketError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw SocketError(description: "\(path) exists and is not a socket; not replacing it")
        }
        if let descriptor = try? UnixSocketAddress(path: path).connect() {
            close(descriptor)
            throw SocketError(description: "another process (another feedd?) is already listening on \(path); stop it or choose another socket path")
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw SocketError(description: "cannot remove the stale socket \(path): \(lastError())")
        }
    }

    static func lastError() -> String { String(cString: strerror(errno)) }
}

/// The process on the other end of a connection, as the kernel vouches for it.
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    public let pid: Int32
    public let uid: UInt32
    public let gid: UInt32

    public var description: String { "pid \(pid) uid \(uid) gid \(gid)" }
}
