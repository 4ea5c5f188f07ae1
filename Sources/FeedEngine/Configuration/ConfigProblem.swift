/// One thing wrong with the configuration, located as precisely as the parser allows.
public struct ConfigProblem: Sendable, Hashable, CustomStringConvertible {
    public let file: String
    public let line: Int?
    public let column: Int?
    public let message: String

    public init(file: String, line: Int? = nil, column: Int? = nil, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    /// `FILE:LINE:COL: message`, or `FILE: message` where no position is known.
    public var description: String { "\(location): \(message)" }

    /// `FILE:LINE:COL: warning: message`, for what does not make the configuration invalid.
    public var warningDescription: String { "\(location): warning: \(message)" }

    /// `FILE:LINE:COL`, or `FILE` where no position is known.
    public var location: String {
        guard let line else { return file }
        return "\(file):\(line):\(column ?? 1)"
    }
}

/// Where something is written in the config, for problems found after loading it.
public struct ConfigLocation: Sendable, Hashable {
    public let file: String
    public let line: Int?
    public let column: Int?

    /// A problem at this place.
    public func problem(_ message: String) -> ConfigProblem {
        ConfigProblem(file: file, line: line, column: column, message: message)
    }
}

/// Every problem found in a configuration; it is rejected as a whole.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public let problems: [ConfigProblem]
    /// What would only have been warned about, had there been no problems.
    public let warnings: [ConfigProblem]
    /// The feeds that were built all the same, so that `check-config` can run their adapters'
    /// own checks and report those problems in the same run.
    public let feeds: [FeedDefinition]

    public init(_ problems: [ConfigProblem], warnings: [ConfigProblem] = [], feeds: [FeedDefinition] = []) {
        self.problems = problems
        self.warnings = warnings
        self.feeds = feeds
    }

    public var description: String { problems.map(\.description).joined(separator: "\n") }
}
