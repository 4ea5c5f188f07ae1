import FeedKit

/// One log record in journald's native form: the `KEY=value` fields sd_journal_sendv(3) takes.
public struct JournalRecord: Sendable, Equatable {
    public let fields: [String]

    /// `MESSAGE=`, `PRIORITY=` (the syslog number), `SYSLOG_IDENTIFIER=`, and `FEEDD_FEED=`,
    /// `FEEDD_PEER_PID=`, `FEEDD_PEER_UID=` for what the record concerns (SPEC §10).
    public init(level: LogLevel, message: String, fields logFields: LogFields, identifier: String) {
        var fields = ["MESSAGE=\(message)", "PRIORITY=\(level.rawValue)", "SYSLOG_IDENTIFIER=\(identifier)"]
        if let feed = logFields.feed { fields.append("FEEDD_FEED=\(feed)") }
        if let pid = logFields.peerPID { fields.append("FEEDD_PEER_PID=\(pid)") }
        if let uid = logFields.peerUID { fields.append("FEEDD_PEER_UID=\(uid)") }
        self.fields = fields
    }
}
