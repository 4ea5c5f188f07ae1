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

/// Where log lines end up. Implementations must be safe to call from any thread.
public protocol LogSink: Sendable {
    func write(_ level: LogLevel, _ message: String)
}

/// Writes log lines to a sink, each prefixed with a label such as `feed users:`.
public struct Logger: Sendable {
    private let sink: any LogSink
    private let prefix: String

    public init(sink: any LogSink, label: String? = nil) {
        self.sink = sink
        self.prefix = label.map { "\($0): " } ?? ""
    }

    /// A logger whose lines carry `label` after this logger's own.
    public func labelled(_ label: String) -> Logger {
        Logger(sink: sink, label: prefix + label)
    }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        sink.write(level, prefix + message())
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}
