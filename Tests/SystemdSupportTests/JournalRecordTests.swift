import FeedKit
import Foundation
import Glibc
import Testing

@testable import SystemdSupport

/// The journal fields of SPEC §10, and when the journal is used at all.
@Suite struct JournalRecordTests {
    @Test func a_record_carries_message_priority_and_identifier() {
        let record = JournalRecord(level: .warning, message: "feed users: page 3: HTTP 503", fields: LogFields(), identifier: "feedd")
        #expect(record.fields == ["MESSAGE=feed users: page 3: HTTP 503", "PRIORITY=4", "SYSLOG_IDENTIFIER=feedd"])
    }

    @Test func a_feed_record_carries_feedd_feed() {
        let record = JournalRecord(level: .info, message: "m", fields: LogFields(feed: "users"), identifier: "feedd")
        #expect(record.fields.contains("FEEDD_FEED=users"))
        #expect(!record.fields.contains { $0.hasPrefix("FEEDD_PEER_") })
    }

    @Test func a_client_record_carries_the_peer_pid_and_uid() {
        let record = JournalRecord(level: .error, message: "m", fields: LogFields(peerPID: 4242, peerUID: 1000), identifier: "feedd")
        #expect(record.fields.contains("FEEDD_PEER_PID=4242"))
        #expect(record.fields.contains("FEEDD_PEER_UID=1000"))
        #expect(record.fields.contains("PRIORITY=3"))
    }

    @Test func a_multi_line_message_stays_one_field() {
        let record = JournalRecord(level: .info, message: "one\ntwo", fields: LogFields(), identifier: "feedd")
        #expect(record.fields.first == "MESSAGE=one\ntwo")
    }

    @Test func a_loggers_fields_accumulate_and_reach_the_sink() {
        let sink = RecordingSink()
        let logger = Logger(sink: sink).forFeed("users").with(LogFields(peerPID: 7, peerUID: 0))
        logger.warning("slow")
        #expect(sink.records == [RecordingSink.Record(level: .warning, message: "feed users: slow", fields: LogFields(feed: "users", peerPID: 7, peerUID: 0))])
    }

    @Test func journal_stream_matches_only_the_descriptor_it_names() throws {
        let descriptor = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
        defer { close(descriptor) }
        var status = stat()
        try #require(fstat(descriptor, &status) == 0)
        let named = try #require(JournalStream(environment: ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"]))
        #expect(named.matches(descriptor: descriptor))
        let other = try #require(JournalStream(environment: ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino + 1)"]))
        #expect(!other.matches(descriptor: descriptor))
    }

    @Test func a_missing_or_malformed_journal_stream_is_none() {
        #expect(JournalStream(environment: [:]) == nil)
        #expect(JournalStream(environment: ["JOURNAL_STREAM": "8"]) == nil)
        #expect(JournalStream(environment: ["JOURNAL_STREAM": "a:b"]) == nil)
        #expect(JournalStream(environment: ["JOURNAL_STREAM": "1:2:3"]) == nil)
    }
}

/// Keeps every record a logger writes.
final class RecordingSink: LogSink {
    struct Record: Equatable {
        let level: LogLevel
        let message: String
        let fields: LogFields
    }

    private let stored = Locked<[Record]>([])
    var records: [Record] { stored.withLock { $0 } }

    func write(_ level: LogLevel, _ message: String) {
        write(level, message, fields: LogFields())
    }

    func write(_ level: LogLevel, _ message: String, fields: LogFields) {
        stored.withLock { $0.append(Record(level: level, message: message, fields: fields)) }
    }
}
