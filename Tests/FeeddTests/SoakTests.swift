import FeedClient
import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// The soak test: off unless FEEDD_SOAK_SECONDS is set, because it runs for minutes.
///
///     FEEDD_SOAK_SECONDS=180 swift test --filter SoakTests
///
/// Many clients connect, scroll, follow, disconnect abruptly mid-line, send garbage and keep
/// durable consumers, while the upstream flaps and the daemon is reloaded with SIGHUP every few
/// seconds. At the end: no crash, no leaked descriptors, memory back near its baseline, and every
/// consumer's cursor what it last acknowledged.
@Suite struct SoakTests {
    static let seconds = ProcessInfo.processInfo.environment["FEEDD_SOAK_SECONDS"].flatMap(Int.init)

    @Test(.enabled(if: seconds != nil, "set FEEDD_SOAK_SECONDS to run the soak test"))
    func the_daemon_survives_minutes_of_abuse() throws {
        let duration = Duration.seconds(Self.seconds ?? 60)
        let upstream = try LoopbackUpstream()
        upstream.setFeedPages((1...5).map { page in (1...10).map { "banner \(page)-\($0)" } })
        let directory = try TemporaryDirectory()
        let notes = try directory.write("notes.ndjson", (1...5_000).map { #"{"note":\#($0)}"# }.joined(separator: "\n") + "\n")
        let config = """
            [daemon]
            prefetch = 2
            stall_timeout = "5s"
            [feeds.users]
            source = "randomuser"
            url = "\(upstream.baseURL)/api/"
            seed = "soak"
            timeout = "500ms"
            retry_max_delay = "300ms"
            cache_pages = 64
            [feeds.carousel]
            source = "s3"
            url = "\(upstream.baseURL)/feed-{page}.json"
            wrap = true
            timeout = "500ms"
            retry_max_delay = "300ms"
            cache_pages = 16
            [feeds.notes]
            source = "file"
            path = "\(notes)"
            page_size = 10
            cache_pages = 64
            """
        let daemon = try DaemonProcess(config: config, directory: directory)
        let figures = SoakFigures()

        // Warm every feed once, then take the baseline.
        for feed in ["users", "carousel", "notes"] {
            let client = try daemon.connect()
            try client.send("next \(feed)")
            _ = try client.read(until: "page")
        }
        let baselineDescriptors = try daemon.openDescriptorCount()
        let baselineMemory = try daemon.memory("RssAnon")

        let deadline = ContinuousClock.now + duration
        let workers = DispatchGroup()
        for worker in 0..<8 {
            DispatchQueue.global().async(group: workers) {
                var generator = SystemRandomNumberGenerator()
                var consumerCursor: Int?
                while ContinuousClock.now < deadline {
                    do {
                        try Self.act(worker: worker, on: daemon, cursor: &consumerCursor, figures: figures, using: &generator)
                    } catch {
                        figures.record(failure: "worker \(worker): \(error)")
                    }
                }
                if let consumerCursor { figures.setCursor(consumer: "soak-\(worker)", consumerCursor) }
            }
        }
        // The weather: upstream faults and reloads, until the deadline.
        var nextReload = ContinuousClock.now + .seconds(3)
        while ContinuousClock.now < deadline {
            let faults: [LoopbackUpstream.Fault] = [.status(500), .status(503, retryAfter: "1"), .hang, .closeWithoutResponse, .truncatedJSON]
            upstream.inject(faults.randomElement()!, times: 1)
            figures.count(\.faultsInjected)
            if ContinuousClock.now >= nextReload {
                daemon.send(signal: SIGHUP)
                figures.count(\.reloads)
                nextReload = .now + .seconds(3)
            }
            Thread.sleep(forTimeInterval: 1)
        }
        workers.wait()

        // Every client is gone: the daemon must be back where it started. Closing a connection
        // takes the daemon a turn of its loop, and it is busy with the weather, so allow time.
        let checker = try daemon.connect()
        let clients = try checker.clientsOnceOthersLeave(within: .seconds(30))
        let status = try checker.request("status")
        if clients > 1 { print("soak: still connected: \(status["peers"]?.jsonText ?? "")") }
        let endDescriptors = try daemon.openDescriptorCount() - 1
        let endMemory = try daemon.memory("RssAnon")
        let summary = figures.summary
        print("""
            soak: \(duration) — \(summary.connections) connections served, \(summary.faultsInjected) upstream faults injected, \
            \(summary.reloads) reloads, \(summary.failures.count) client-side failures
            soak: descriptors \(baselineDescriptors) at start, \(endDescriptors) at end; \
            RssAnon \(baselineMemory) kB at start, \(endMemory) kB at end
            """)
        #expect(daemon.isRunning)
        #expect(summary.failures.isEmpty, "\(summary.failures.prefix(10))")
        #expect(clients == 1, "only the checker is left")
        #expect(endDescriptors <= baselineDescriptors, "no leaked descriptors")
        #expect(endMemory < baselineMemory + 24_576 || Sanitizer.isActive, "memory back near its baseline")
        let consumers = status["feeds"]?.arrayValue?.first { $0["name"] == "notes" }?["consumers"]?.arrayValue ?? []
        for (name, cursor) in summary.cursors {
            let stored = consumers.first { $0["name"] == .string(name) }?["after"]?.integerValue
            #expect(stored == Int64(cursor), "consumer \(name): stored \(String(describing: stored)), acknowledged \(cursor)")
        }
    }

    /// One random thing a client does.
    static func act(
        worker: Int, on daemon: DaemonProcess, cursor: inout Int?, figures: SoakFigures, using generator: inout SystemRandomNumberGenerator
    ) throws {
        let client = try daemon.connect()
        figures.count(\.connections)
        let feed = ["users", "carousel", "notes"].randomElement(using: &generator)!
        switch Int.random(in: 0..<5, using: &generator) {
        case 0:
            try client.send("next \(feed) \(Int.random(in: 1...5, using: &generator))")
            do { _ = try client.read(until: "page", timeout: .seconds(30)) } catch { throw TestFailure("next \(feed): \(error)") }
        case 1:
            try client.send("follow \(feed)")
            do {
                for _ in 0..<Int.random(in: 1...20, using: &generator) { _ = try client.read(timeout: .seconds(30)) }
            } catch { throw TestFailure("follow \(feed): \(error)") }
        case 2:
            let garbage = (0..<Int.random(in: 1...2_000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            try client.connection.sendRaw(garbage + Array("\nping\n".utf8))
            _ = try client.read(until: "pong", timeout: .seconds(30))
        case 3:
            try client.connection.sendRaw(Array(#"{"op":"next","feed":"us"#.utf8))
        default:
            // A durable consumer: it must always resume exactly after its last acknowledged page.
            let subscribed = try client.request(["op": "subscribe", "feed": "notes", "consumer": .string("soak-\(worker)")])
            guard subscribed["after"]?.integerValue == Int64(cursor ?? 0) else {
                throw TestFailure("consumer soak-\(worker) resumed after \(subscribed["after"] ?? nil), not \(cursor ?? 0)")
            }
            try client.send("next notes 2")
            var last: Int?
            for _ in 0..<2 {
                let reply = try client.read(timeout: .seconds(30))
                guard reply["type"] == "page" else {
                    guard reply["type"] == "end" else { throw TestFailure("next notes: \(reply.jsonText)") }
                    break
                }
                last = reply["page"]?.integerValue.map(Int.init)
            }
            guard let last else {
                // Read to the end of the file: the consumer starts over.
                let forgotten = try client.request(["op": "forget", "feed": "notes", "consumer": .string("soak-\(worker)")])
                guard forgotten["type"] == "forgotten" else { throw TestFailure("forget: \(forgotten.jsonText)") }
                cursor = nil
                return
            }
            guard try client.request("ack notes \(last)")["page"]?.integerValue == Int64(last) else { throw TestFailure("ack lost") }
            cursor = last
        }
        // Closing without quit: an abrupt disconnect, often with replies still in flight.
    }
}

/// What the soak's workers saw, shared between their threads.
final class SoakFigures: Sendable {
    struct Summary {
        var connections = 0
        var faultsInjected = 0
        var reloads = 0
        var failures: [String] = []
        var cursors: [String: Int] = [:]
    }

    private let state = Locked(Summary())

    var summary: Summary { state.withLock { $0 } }

    func count(_ figure: WritableKeyPath<Summary, Int>) {
        state.withLock { $0[keyPath: figure] += 1 }
    }

    func record(failure: String) {
        state.withLock { $0.failures.append(failure) }
    }

    func setCursor(consumer: String, _ cursor: Int) {
        state.withLock { $0.cursors[consumer] = cursor }
    }
}
