import FeedKit
import Glibc

/// Why talking to the daemon failed, in one line.
public struct FeedClientError: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// A blocking connection to feedd's socket that sends request lines and reads reply lines,
/// each read bounded by a timeout. Used by `feedctl` and by the end-to-end tests.
public final class FeedConnection {
    public let descriptor: Int32
    private var buffered: [UInt8] = []
    private var start = 0
    /// Where the search for the next newline goes on: bytes before it (from `start`) hold none,
    /// so a long line arriving in many reads is scanned once, not once per read.
    private var scanned = 0

    /// Connects to the socket at `path`.
    public init(path: String) throws(FeedClientError) {
        descriptor = try UnixSocketAddress(path: path).connect()
    }

    deinit {
        Glibc.close(descriptor)
    }

    /// Sends `line` and a newline.
    public func send(_ line: String) throws(FeedClientError) {
        try sendRaw(Array((line + "\n").utf8))
    }

    /// Sends a request object as one JSON line.
    public func send(_ request: JSONValue) throws(FeedClientError) {
        try sendRaw(request.serialized + [UInt8(ascii: "\n")])
    }

    /// Sends bytes exactly as given.
    public func sendRaw(_ bytes: [UInt8]) throws(FeedClientError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw FeedClientError("cannot write to feedd: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    /// Half-closes the connection: the daemon sees end of input but can still answer.
    public func finishSending() {
        shutdown(descriptor, Int32(SHUT_WR))
    }

    /// The next line without its newline; nil when the daemon closed the connection.
    /// Throws when nothing arrives within `timeout` (nil waits forever).
    public func readLine(timeout: Duration? = .seconds(10)) throws(FeedClientError) -> [UInt8]? {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            if let newline = buffered[max(start, scanned)...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffered[start..<newline])
                start = newline + 1
                scanned = start
                if start > 65_536, start * 2 > buffered.count {
                    buffered.removeFirst(start)
                    start = 0
                    scanned = 0
                }
                return line
            }
            scanned = buffered.count
            guard try waitReadable(until: deadline) else { throw FeedClientError("no reply from feedd within \(timeout!)") }
            // Into uninitialised scratch space, not a fresh zeroed 64 KiB array per read: this
            // client also times the daemon's replies in feedd-bench.
            let count = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 65_536) { chunk in
                let count = recv(descriptor, chunk.baseAddress, chunk.count, 0)
                if count > 0 { buffered.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[0..<count])) }
                return count
            }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET { return nil }
                throw FeedClientError("cannot read from feedd: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return nil }
        }
    }

    /// The next line parsed as JSON; nil when the daemon closed the connection.
    public func readMessage(timeout: Duration? = .seconds(10)) throws(FeedClientError) -> JSONValue? {
        guard let line = try readLine(timeout: timeout) else { return nil }
        do {
            return try JSONValue(parsing: line)
        } catch {
            throw FeedClientError("feedd sent a line that is not JSON: \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
    }

    private func waitReadable(until deadline: ContinuousClock.Instant?) throws(FeedClientError) -> Bool {
        while true {
            var milliseconds: Int32 = -1
            if let deadline {
                let remaining = deadline - .now
                if remaining <= .zero { return false }
                milliseconds = Int32(clamping: remaining.wholeMilliseconds + 1)
            }
            var request = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&request, 1, milliseconds)
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { throw FeedClientError("cannot wait for feedd: \(String(cString: strerror(errno)))") }
        }
    }
}

/// A Unix socket path in the form the kernel takes it.
public struct UnixSocketAddress: Sendable {
    public let path: String
    public let address: sockaddr_un

    public init(path: String) throws(FeedClientError) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw FeedClientError("socket path \"\(path)\" must be 1 to \(capacity - 1) bytes long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        self.path = path
        self.address = address
    }

    /// Calls `body` with the address as the `sockaddr` that bind(2) and connect(2) take.
    public func withSocketAddress<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// A blocking stream socket connected to this address.
    public func connect() throws(FeedClientError) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw FeedClientError("cannot create a socket: \(String(cString: strerror(errno)))") }
        let connected = withSocketAddress { Glibc.connect(descriptor, $0, $1) }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw FeedClientError("cannot connect to \(path): \(reason)")
        }
        return descriptor
    }
}
