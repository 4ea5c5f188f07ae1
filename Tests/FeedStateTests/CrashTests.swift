import FeedKit
import Foundation
import Testing
import TestSupport

@testable import FeedState

/// `kill -9` at random moments while a child process commits as fast as it can, 50 times over
/// the same state directory: every write the child confirmed is in the store afterwards.
@Suite struct CrashTests {
    /// What the child confirmed before it died (see Tests/StateTorture/main.swift).
    private struct Confirmed {
        var generation = 0
        var pages: [Int: Int] = [:]
        var cursors: [String: StoredCursor] = [:]

        init(_ output: String) {
            for line in output.split(separator: "\n") {
                let words = line.split(separator: " ").map(String.init)
                switch (words.first, words.count) {
                case ("G", 2): generation = max(generation, Int(words[1])!)
                case ("P", 3): pages[Int(words[1])!] = max(pages[Int(words[1])!] ?? 0, Int(words[2])!)
                case ("C", 4): cursors[words[1]] = StoredCursor(generation: Int(words[2])!, cursor: Int(words[3])!)
                default: break
                }
            }
        }
    }

    @Test(.timeLimit(.minutes(2))) func test_kill_9_at_random_points_loses_no_confirmed_write_in_50_rounds() throws {
        let fixture = try StoreFixture()
        let torture = "\(FeeddBinaries.directory)/feedd-state-torture"
        var totalConfirmed = 0
        for round in 1...50 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: torture)
            process.arguments = [fixture.directory]
            let (output, errors) = try ChildProcess.launch(process)
            usleep(UInt32.random(in: 20_000...250_000))
            kill(process.processIdentifier, SIGKILL)
            let printed = String(decoding: output.readDataToEndOfFile(), as: UTF8.self)
            let complaints = String(decoding: errors.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(complaints.isEmpty, "round \(round): \(complaints)")
            let confirmed = Confirmed(printed)
            totalConfirmed += printed.count { $0 == "\n" }

            let store = try fixture.open()
            defer { store.close() }
            #expect(fixture.sink.recorded.isEmpty, "round \(round): \(fixture.sink.recorded)")
            guard confirmed.generation > 0 else { continue }
            let feed = try #require(store.feed("f"), "round \(round)")
            // A confirmed generation is there; at most the one being started when killed follows it.
            #expect((confirmed.generation...(confirmed.generation + 1)).contains(feed.generation), "round \(round)")
            if feed.generation == confirmed.generation {
                #expect(feed.pages.count >= confirmed.pages[feed.generation] ?? 0, "round \(round)")
            }
            #expect(feed.seed == "seed-\(feed.generation)")
            for (consumer, cursor) in confirmed.cursors where cursor.generation == feed.generation {
                let stored = try #require(store.cursor(feed: "f", consumer: consumer), "round \(round): consumer \(consumer)")
                #expect(stored.generation == cursor.generation && stored.cursor >= cursor.cursor, "round \(round): consumer \(consumer)")
            }
            for (name, stored) in store.consumers(of: "f") {
                #expect(stored.generation == feed.generation, "round \(round): consumer \(name)")
                #expect(stored.cursor <= feed.pages.count, "round \(round): consumer \(name)")
            }
        }
        // The rounds did real work, not just start-ups that were killed.
        #expect(totalConfirmed > 1000)
    }

    @Test(.timeLimit(.minutes(1))) func test_a_second_process_is_refused_with_the_pid_of_the_first() throws {
        let fixture = try StoreFixture()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "\(FeeddBinaries.directory)/feedd-state-torture")
        process.arguments = [fixture.directory]
        let (output, _) = try ChildProcess.launch(process)
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        // Its first confirmed write means it holds the lock.
        _ = output.availableData
        let error = #expect(throws: StoreError.self) { try fixture.open() }
        #expect(error?.description == "the state directory \(fixture.directory) is in use by another feedd (pid \(process.processIdentifier), holding \(fixture.directory)/lock)")
    }
}
