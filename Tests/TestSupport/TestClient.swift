import FeedClient
import FeedKit
import Foundation

/// A socket client for tests: every read has a timeout and every helper says what it expected.
public final class TestClient {
    public let connection: FeedConnection

    public init(path: String) throws {
        connection = try FeedConnection(path: path)
    }

    /// Sends a line as typed (the inline form, or JSON text).
    public func send(_ line: String) throws {
        try connection.send(line)
    }

    /// Sends a request object.
    public func send(_ request: JSONValue) throws {
        try connection.send(request)
    }

    /// The next message; throws if the daemon closes the connection or says nothing in time.
    public func read(timeout: Duration = .seconds(10)) throws -> JSONValue {
        guard let message = try connection.readMessage(timeout: timeout) else {
            throw TestFailure("feedd closed the connection")
        }
        return message
    }

    /// The next message, which must be of `type`.
    @discardableResult
    public func expect(_ type: String, timeout: Duration = .seconds(10)) throws -> JSONValue {
        let message = try read(timeout: timeout)
        guard message["type"]?.stringValue == type else {
            throw TestFailure("expected a \"\(type)\" message, got \(message.jsonText)")
        }
        return message
    }

    /// Sends `request` and returns the first reply.
    public func request(_ request: JSONValue) throws -> JSONValue {
        try send(request)
        return try read()
    }

    /// Sends `line` and returns the first reply.
    public func request(_ line: String) throws -> JSONValue {
        try send(line)
        return try read()
    }

    /// Reads messages until one of `type` arrives, returning those skipped and it.
    public func read(until type: String, timeout: Duration = .seconds(10)) throws -> (skipped: [JSONValue], found: JSONValue) {
        var skipped: [JSONValue] = []
        while true {
            let message = try read(timeout: timeout)
            if message["type"]?.stringValue == type { return (skipped, message) }
            skipped.append(message)
        }
    }

    /// Reads until the daemon closes the connection; returns everything read.
    public func readUntilClosed(timeout: Duration = .seconds(10)) throws -> [JSONValue] {
        var messages: [JSONValue] = []
        while let message = try connection.readMessage(timeout: timeout) { messages.append(message) }
        return messages
    }

    /// The `clients` count of `status`, asked until this is the only client left or `within` has
    /// passed (the daemon lets a client go on its own schedule, and says so only in `status`).
    public func clientsOnceOthersLeave(within: Duration = .seconds(10)) throws -> Int64 {
        var clients: Int64 = .max
        let deadline = ContinuousClock.now + within
        while clients > 1, ContinuousClock.now < deadline {
            clients = try request("status")["clients"]?.integerValue ?? -1
            if clients > 1 { Thread.sleep(forTimeInterval: 0.02) }
        }
        return clients
    }

    /// Whether the daemon closed the connection (reading gives end of file) within `timeout`.
    public func isClosedByDaemon(timeout: Duration = .seconds(10)) throws -> Bool {
        try connection.readLine(timeout: timeout) == nil
    }
}

extension JSONValue {
    /// The page numbers of an array of page messages.
    public static func pageNumbers(_ messages: [JSONValue]) -> [Int64] {
        messages.compactMap { $0["page"]?.integerValue }
    }
}
