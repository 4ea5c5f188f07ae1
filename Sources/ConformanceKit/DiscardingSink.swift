import FeedKit

/// A log sink that drops every line, for adapters under test.
public struct DiscardingSink: LogSink {
    public init() {}
    public func write(_ level: LogLevel, _ message: String) {}
}
