import FeedKit

/// Logs clients connecting and being refused without letting churn flood the journal: within each
/// 10-second window the first few get a line each, and the rest are summed up in one line when
/// the window ends ("… and 19,800 more connections in the last 10 s").
@MainActor
final class ConnectionLog {
    static let window: Duration = .seconds(10)
    static let linesPerWindow = 20

    private let logger: Logger
    private let loop: EventLoop
    private var linesInWindow = 0
    private var unlogged = 0
    private var windowTimer: EventLoop.Timer?

    init(logger: Logger, loop: EventLoop) {
        self.logger = logger
        self.loop = loop
    }

    /// Logs `message` through `logger` (the server's, or one carrying the peer's journal fields)
    /// while the window has room.
    func log(_ level: LogLevel, _ message: @autoclosure () -> String, to logger: Logger? = nil) {
        if windowTimer == nil {
            windowTimer = loop.schedule(after: Self.window) { [weak self] in self?.endWindow() }
        }
        if linesInWindow < Self.linesPerWindow {
            linesInWindow += 1
            (logger ?? self.logger).log(level, message())
        } else {
            unlogged += 1
        }
    }

    private func endWindow() {
        windowTimer = nil
        linesInWindow = 0
        guard unlogged > 0 else { return }
        logger.notice("… and \(unlogged) more connections accepted or refused in the last \(Self.window.wholeMilliseconds / 1000) s, not logged one by one")
        unlogged = 0
    }
}
