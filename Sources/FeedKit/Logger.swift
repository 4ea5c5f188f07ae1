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

    /// The level spelled `name` (see ``name``); nil for any other word.
    package init?(name: String) {
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

    /// Fields naming a feed, a client, or both.
    package init(feed: String? = nil, peerPID: Int32? = nil, peerUID: UInt32? = nil) {
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
package protocol LogSink: Sendable {
    /// Writes one record.
    func write(_ level: LogLevel, _ message: String)
    /// Writes one record with the fields it concerns.
    func write(_ level: LogLevel, _ message: String, fields: LogFields)
}

extension LogSink {
    /// Writes the record without its fields.
    package func write(_ level: LogLevel, _ message: String, fields: LogFields) {
        write(level, message)
    }
}

/// Writes log lines to a sink, each prefixed with a label such as `feed users:` and carrying
/// the structured fields of what it is about.
public struct Logger: Sendable {
    private let sink: any LogSink
    private let prefix: String
    private let fields: LogFields

    /// A logger writing to `sink`, its lines prefixed with `label:` if given. The daemon makes
    /// the loggers adapters get (``AdapterContext/logger``).
    package init(sink: any LogSink, label: String? = nil) {
        self.init(sink: sink, prefix: label.map { "\($0): " } ?? "", fields: LogFields())
    }

    /// A logger that drops every record, for an adapter's own tests.
    public static let discarding = Logger(sink: DiscardingLogSink())

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
    package func with(_ fields: LogFields) -> Logger {
        Logger(sink: sink, prefix: prefix, fields: self.fields.merging(fields))
    }

    /// Logs `message` at `level`; the message is built only if the record is written.
    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        sink.write(level, prefix + message(), fields: fields)
    }

    /// Logs at `debug`: what only someone chasing a problem wants to see.
    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    /// Logs at `info`: what happened, in the normal course.
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    /// Logs at `notice`: a change an operator may want to know of.
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    /// Logs at `warning`: something went wrong and is being dealt with.
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    /// Logs at `error`: something failed that someone must look at.
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}

/// The sink of ``Logger/discarding``.
private struct DiscardingLogSink: LogSink {
    func write(_ level: LogLevel, _ message: String) {}
}
