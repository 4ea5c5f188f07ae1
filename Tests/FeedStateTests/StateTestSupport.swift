import FeedKit
import Foundation
import TestSupport

@testable import FeedState

/// A log sink that keeps the lines, to check what a store reported.
final class RecordingSink: LogSink {
    private let lines = Locked<[String]>([])

    func write(_ level: LogLevel, _ message: String) {
        lines.withLock { $0.append(message) }
    }

    var recorded: [String] { lines.withLock { $0 } }
}

/// Opens stores in one temporary directory, with the log lines they wrote.
struct StoreFixture {
    let temporary: TemporaryDirectory
    let sink = RecordingSink()
    var directory: String { temporary.path("state") }
    var databasePath: String { "\(directory)/\(StateStore.databaseName)" }

    init() throws {
        temporary = try TemporaryDirectory()
    }

    func open(_ directory: String? = nil, options: StateStore.Options = .init()) throws(StoreError) -> StateStore {
        try StateStore(directory: directory ?? self.directory, options: options, logger: Logger(sink: sink))
    }

    /// A store with feed `f` at generation 1 and `pages` pages recorded.
    func openWithFeed(pages: Int = 10, directory: String? = nil, options: StateStore.Options = .init()) async throws -> StateStore {
        let store = try open(directory, options: options)
        try await store.startGeneration(feed: "f", generation: 1, fingerprint: "shape-1", seed: "s1")
        for page in stride(from: 1, through: pages, by: 1) {
            try await store.recordPage(feed: "f", generation: 1, page: page, token: "t\(page + 1)", body: nil)
        }
        return store
    }
}

extension StateStore {
    /// Runs SQL on the writer thread, to damage or constrain the database behind the store's back.
    func executeOnWriter(_ sql: String) async throws(StoreError) {
        try await onWriterThread { connection throws(StoreError) in try connection.execute(sql) }
    }
}

/// Runs `arguments` (mount, umount, …) and says whether it worked.
@discardableResult
func runCommand(_ arguments: [String]) -> Bool {
    guard let result = try? ChildProcess.run("/usr/bin/env", arguments) else { return false }
    return result.status == 0
}
