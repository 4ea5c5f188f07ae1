import FeedKit
import Foundation
import Glibc

/// Durable state: every consumer's cursor and every feed's generation, in an append-only log in
/// `state_dir` that survives `kill -9` at any moment.
///
/// Each change is one line, `<16 hex digits of FNV-1a of the JSON> <JSON>`, appended and
/// fdatasync'd before the change is confirmed to anyone. On start the log is replayed: a torn last
/// line (a crash mid-write) or any record whose checksum does not match is reported and skipped,
/// never a reason to crash or to forget every consumer. When the log grows, a snapshot is written
/// to a temporary file, fsync'd, renamed over it, and the directory fsync'd.
@MainActor
public final class ConsumerStore {
    public struct Key: Hashable, Sendable {
        public let feed: String
        public let consumer: String
    }

    public let directory: String
    private let logPath: String
    private let logger: Logger
    private var log: Int32 = -1
    private var appendedSinceSnapshot = 0
    private static let snapshotAfter = 4_096
    public private(set) var cursors: [Key: Int] = [:]
    public private(set) var generations: [String: Int] = [:]

    /// Opens (creating if needed) the store in `directory` and replays its log.
    public init(directory: String, logger: Logger) throws(StoreError) {
        self.directory = directory
        logPath = "\(directory)/consumers.log"
        self.logger = logger
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw StoreError("cannot create the state directory \(directory): \((error as NSError).localizedDescription)")
        }
        try replay()
        try snapshot()
    }

    /// The stored cursor of `consumer` on `feed`, if it has one.
    public func cursor(feed: String, consumer: String) -> Int? {
        cursors[Key(feed: feed, consumer: consumer)]
    }

    /// The consumers of `feed` and their cursors, sorted by name.
    public func consumers(of feed: String) -> [(name: String, cursor: Int)] {
        cursors.filter { $0.key.feed == feed }.map { ($0.key.consumer, $0.value) }.sorted { $0.name < $1.name }
    }

    /// Makes `cursor` the stored cursor of `consumer` on `feed`; durable when this returns.
    public func store(feed: String, consumer: String, cursor: Int) throws(StoreError) {
        guard cursors[Key(feed: feed, consumer: consumer)] != cursor else { return }
        try record(["t": "cursor", "feed": .string(feed), "consumer": .string(consumer), "cursor": .integer(Int64(cursor))])
    }

    /// A refresh: `feed` is now at `generation`, and every consumer of it is back at 0.
    public func startGeneration(_ generation: Int, of feed: String) throws(StoreError) {
        try record(["t": "generation", "feed": .string(feed), "generation": .integer(Int64(generation))])
    }

    /// Deletes a consumer's cursor; false if it had none.
    public func forget(feed: String, consumer: String) throws(StoreError) -> Bool {
        guard cursors[Key(feed: feed, consumer: consumer)] != nil else { return false }
        try record(["t": "forget", "feed": .string(feed), "consumer": .string(consumer)])
        return true
    }

    /// Makes a change durable, then applies it exactly as replaying the log at start will. The
    /// snapshot comes after applying: taken before, it would leave the change out of the new log.
    private func record(_ change: JSONValue) throws(StoreError) {
        try append(change)
        apply(change)
        if appendedSinceSnapshot >= Self.snapshotAfter { try snapshot() }
    }

    // MARK: The log

    private func append(_ record: JSONValue) throws(StoreError) {
        try write(Self.line(for: record), to: log, what: logPath)
        guard fdatasync(log) == 0 else { throw StoreError("cannot sync \(logPath): \(String(cString: strerror(errno)))") }
        appendedSinceSnapshot += 1
    }

    private static func line(for record: JSONValue) -> [UInt8] {
        let json = record.serialized
        return Array(StableHash.hex(json).utf8) + [UInt8(ascii: " ")] + json + [UInt8(ascii: "\n")]
    }

    private func replay() throws(StoreError) {
        guard let data = FileManager.default.contents(atPath: logPath) else { return }
        let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        var applied = 0
        var rejected: [String] = []
        for (index, line) in lines.enumerated() where !line.isEmpty {
            let isLast = index == lines.count - 1
            guard let record = Self.verified(line) else {
                rejected.append(isLast ? "a torn last record" : "line \(index + 1)")
                continue
            }
            apply(record)
            applied += 1
        }
        if !rejected.isEmpty {
            let kept = "\(logPath).damaged-\(Int(Date().timeIntervalSince1970))"
            try? FileManager.default.copyItem(atPath: logPath, toPath: kept)
            logger.error("\(logPath): skipped \(rejected.count) damaged record\(rejected.count == 1 ? "" : "s") (\(rejected.prefix(5).joined(separator: ", "))\(rejected.count > 5 ? ", …" : "")); recovered \(applied) records, \(cursors.count) consumer cursors; the damaged log is kept as \(kept)")
        } else if applied > 0 {
            logger.info("recovered \(cursors.count) consumer cursors from \(logPath)")
        }
    }

    private static func verified(_ line: Data.SubSequence) -> JSONValue? {
        let bytes = Array(line)
        guard bytes.count > 17, bytes[16] == UInt8(ascii: " ") else { return nil }
        let json = bytes[17...]
        guard String(decoding: bytes[0..<16], as: UTF8.self) == StableHash.hex(json) else { return nil }
        return try? JSONValue(parsing: json)
    }

    private func apply(_ record: JSONValue) {
        guard let feed = record["feed"]?.stringValue else { return }
        switch record["t"]?.stringValue {
        case "cursor":
            if let consumer = record["consumer"]?.stringValue, let cursor = record["cursor"]?.integerValue {
                cursors[Key(feed: feed, consumer: consumer)] = Int(cursor)
            }
        case "generation":
            if let generation = record["generation"]?.integerValue {
                generations[feed] = Int(generation)
                for key in cursors.keys where key.feed == feed { cursors[key] = 0 }
            }
        case "forget":
            if let consumer = record["consumer"]?.stringValue { cursors[Key(feed: feed, consumer: consumer)] = nil }
        default:
            break
        }
    }

    /// Rewrites the log as the current state: temporary file, fsync, rename, fsync the directory.
    private func snapshot() throws(StoreError) {
        var bytes: [UInt8] = []
        for (feed, generation) in generations.sorted(by: { $0.key < $1.key }) {
            bytes += Self.line(for: ["t": "generation", "feed": .string(feed), "generation": .integer(Int64(generation))])
        }
        for (key, cursor) in cursors.sorted(by: { ($0.key.feed, $0.key.consumer) < ($1.key.feed, $1.key.consumer) }) {
            bytes += Self.line(for: ["t": "cursor", "feed": .string(key.feed), "consumer": .string(key.consumer), "cursor": .integer(Int64(cursor))])
        }
        let temporary = "\(logPath).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw StoreError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        try write(bytes, to: descriptor, what: temporary)
        guard fsync(descriptor) == 0 else { throw StoreError("cannot sync \(temporary): \(String(cString: strerror(errno)))") }
        try replaceLog(with: temporary)
    }

    private func replaceLog(with temporary: String) throws(StoreError) {
        guard rename(temporary, logPath) == 0 else { throw StoreError("cannot replace \(logPath): \(String(cString: strerror(errno)))") }
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
        if log >= 0 { close(log) }
        log = open(logPath, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard log >= 0 else { throw StoreError("cannot open \(logPath): \(String(cString: strerror(errno)))") }
        appendedSinceSnapshot = 0
    }

    private func write(_ bytes: [UInt8], to descriptor: Int32, what path: String) throws(StoreError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw StoreError("cannot write \(path): \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }
}

/// The state directory cannot be read or written.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
