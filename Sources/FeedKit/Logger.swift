/// How serious a log line is, as syslog and sd-daemon(3) number it.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case error = 3
    case warning = 4
    case notice = 5
    case info = 6
    case debug = 7

    /// The config's spelling: `debug`, `info`, `notice`, `warning`, `error`.
    public var name: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    public init?(name: String) {
        guard let level = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = level
    }

    /// More severe levels compare lower, as their syslog numbers do.
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What a log record is about, besides its text: the feed, the client. Under journald these
/// become the fields `FEEDD_FEED=`, `FEEDD_PEER_PID=` and `FEEDD_PEER_UID=` (SPEC §10), so
/// `journalctl FEEDD_FEED=users` finds every record about that feed.
public struct LogFields: Sendable, Equatable {
    /// The feed the record concerns.
    public var feed: String?
    /// The process id of the client the record concerns.
    public var peerPID: Int32?
    /// The user id of the client the record concerns.
    public var peerUID: UInt32?

    public init(feed: String? = nil, peerPID: Int32? = nil, peerUID: UInt32? = nil) {
        self.feed = feed
        self.peerPID = peerPID
        self.peerUID = peerUID
    }

    /// These fields, with those `other` sets replacing them.
    func merging(_ other: LogFields) -> LogFields {
        LogFields(feed: other.feed ?? feed, peerPID: other.peerPID ?? peerPID, peerUID: other.peerUID ?? peerUID)
    }
}

/// Where log lines end up. Implementations must be safe to call from any thread.
///
/// A sink that has no use for structured fields implements only ``write(_:_:)``; the
/// ``write(_:_:fields:)`` a ``Logger`` calls then drops them.
public protocol LogSink: Sendable {
    func write(_ level: LogLevel, _ message: String)
    /// Writes one record with the fields it concerns.
    func write(_ level: LogLevel, _ message: String, fields: LogFields)
}

extension LogSink {
    public func write(_ level: LogLevel, _ message: String, fields: LogFields) {
        write(level, message)
    }
}

/// Writes log lines to a sink, each prefixed with a label such as `feed users:` and carrying
/// the structured fields of what it is about.
public struct Logger: Sendable {
    private let sink: any LogSink
    private let prefix: String
    private let fields: LogFields

    public init(sink: any LogSink, label: String? = nil) {
        self.init(sink: sink, prefix: label.map { "\($0): " } ?? "", fields: LogFields())
    }

    private init(sink: any LogSink, prefix: String, fields: LogFields) {
        self.sink = sink
        self.prefix = prefix
        self.fields = fields
    }

    /// A logger whose lines carry `label` after this logger's own.
    public func labelled(_ label: String) -> Logger {
        Logger(sink: sink, prefix: prefix + "\(label): ", fields: fields)
    }

    /// A logger for one feed: its lines start `feed NAME:` and carry `FEEDD_FEED=NAME`.
    public func forFeed(_ name: String) -> Logger {
        labelled("feed \(name)").with(LogFields(feed: name))
    }

    /// A logger whose records also carry `fields` (those set replace this logger's own).
    public func with(_ fields: LogFields) -> Logger {
        Logger(sink: sink, prefix: prefix, fields: self.fields.merging(fields))
    }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        sink.write(level, prefix + message(), fields: fields)
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}
