import FeedClient
import FeedKit
import Foundation
import Glibc
import TestSupport

/// A socket that speaks just enough of feedd's protocol for feedctl: a `hello`, then for each
/// request line the lines `answer` gives, recording every request. For ops the real daemon does
/// not answer yet, and (``silent()``) to tell whether feedctl connected at all.
final class FakeDaemon: @unchecked Sendable {
    // Sendable: `listener` and `answer` are set in init and only read; `requestsSeen` has its own lock.
    let socketPath: String
    private let directory: TemporaryDirectory
    private let listener: Int32
    private let answer: @Sendable (JSONValue) -> [JSONValue]
    private let requestsSeen = Locked([JSONValue]())

    /// Listens at a new socket and answers; `feeds` go in the hello.
    convenience init(feeds: [String], answer: @escaping @Sendable (JSONValue) -> [JSONValue]) throws {
        try self.init(answer: answer)
        let hello: JSONValue = ["type": "hello", "name": "feedd", "version": "0.0.9", "protocol": 1, "feeds": .array(feeds.map(JSONValue.string))]
        Thread { [self] in serve(hello: hello) }.start()
    }

    /// A socket that listens and never accepts: a connection made to it waits in its backlog,
    /// where ``wasConnected`` finds it.
    static func silent() throws -> FakeDaemon {
        let daemon = try FakeDaemon(answer: { _ in [] })
        _ = fcntl(daemon.listener, F_SETFL, fcntl(daemon.listener, F_GETFL) | O_NONBLOCK)
        return daemon
    }

    /// Whether a client connected to a ``silent()`` socket.
    var wasConnected: Bool {
        let client = accept(listener, nil, nil)
        if client >= 0 { close(client) }
        return client >= 0
    }

    private init(answer: @escaping @Sendable (JSONValue) -> [JSONValue]) throws {
        directory = try TemporaryDirectory()
        socketPath = directory.path("fake.sock")
        self.answer = answer
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard try UnixSocketAddress(path: socketPath).withSocketAddress({ bind(listener, $0, $1) }) == 0, listen(listener, 8) == 0 else {
            throw TestFailure("cannot listen at \(socketPath)")
        }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    var requests: [JSONValue] { requestsSeen.withLock { $0 } }

    private func serve(hello: JSONValue) {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            converse(with: client, hello: hello)
            close(client)
        }
    }

    private func converse(with client: Int32, hello: JSONValue) {
        send(hello, to: client)
        var buffered: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            buffered += chunk[0..<count]
            while let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffered[..<newline])
                buffered.removeFirst(newline + 1)
                guard let request = try? JSONValue(parsing: line) else { continue }
                requestsSeen.withLock { $0.append(request) }
                for reply in answer(request) { send(reply, to: client) }
            }
        }
    }

    private func send(_ message: JSONValue, to client: Int32) {
        let bytes = message.serialized + [UInt8(ascii: "\n")]
        _ = bytes.withUnsafeBytes { Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }
}
