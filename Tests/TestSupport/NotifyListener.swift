import FeedClient
import Foundation
import Glibc

/// A datagram socket standing in for systemd's NOTIFY_SOCKET: collects every sd_notify message.
public final class NotifyListener: @unchecked Sendable {
    // Sendable: the message list is guarded by `condition`; the descriptor is fixed at init.
    public let path: String
    private let descriptor: Int32
    private let condition = NSCondition()
    private var messages: [(at: ContinuousClock.Instant, text: String)] = []

    public init(in directory: TemporaryDirectory) throws {
        path = directory.path("notify.sock")
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let address = try UnixSocketAddress(path: path)
        guard address.withSocketAddress({ bind(descriptor, $0, $1) }) == 0 else {
            throw TestFailure("cannot bind \(path): \(String(cString: strerror(errno)))")
        }
        startReading()
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// The reading thread owns the descriptor and closes it when it ends, so it never reads from
    /// a descriptor number that another test's socket has taken over.
    private func startReading() {
        let descriptor = descriptor
        Thread.detachNewThread { [weak self] in
            defer { close(descriptor) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                guard count > 0, let self else { return }
                let text = String(decoding: buffer[0..<count], as: UTF8.self)
                self.condition.lock()
                self.messages.append((ContinuousClock.now, text))
                self.condition.broadcast()
                self.condition.unlock()
            }
        }
    }

    /// Every message so far, each as sent (assignments separated by newlines).
    public var received: [String] {
        condition.lock()
        defer { condition.unlock() }
        return messages.map(\.text)
    }

    /// When each message containing `text` arrived.
    public func arrivals(of text: String) -> [ContinuousClock.Instant] {
        condition.lock()
        defer { condition.unlock() }
        return messages.filter { $0.text.contains(text) }.map(\.at)
    }

    /// Waits until `count` messages contain `text`; returns the last of them.
    @discardableResult
    public func waitFor(_ text: String, count: Int = 1, timeout: Duration = .seconds(15)) throws -> String {
        let deadline = Date(timeIntervalSinceNow: Double(timeout.wholeMilliseconds) / 1000)
        condition.lock()
        defer { condition.unlock() }
        while true {
            let matching = messages.filter { $0.text.contains(text) }
            if matching.count >= count { return matching[count - 1].text }
            guard condition.wait(until: deadline) else {
                throw TestFailure("no \(count)× \"\(text)\" from sd_notify within \(timeout); got \(messages.map(\.text))")
            }
        }
    }
}
