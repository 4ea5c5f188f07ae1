import FeedKit
import Foundation
import Testing
import TestSupport

/// A `merge` feed as a real subscriber of its members (SPEC §9): live members stay followed and
/// polled while the merge is followed, big member pages cost the other clients nothing, and a
/// failing member is skipped at once and named in `status`.
@Suite struct MergeLiveMembersTests {
    static func ids(_ page: JSONValue) -> [String] {
        page["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    static func append(_ text: String, to path: String) throws {
        let handle = try #require(FileHandle(forWritingAtPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
    }

    @Test func lines_appended_to_followed_file_members_reach_the_merge_follower_within_their_poll() throws {
        let directory = try TemporaryDirectory()
        let notes = try directory.write("notes.ndjson", "call Ana\n")
        let todo = try directory.write("todo.ndjson", "paint\n")
        let daemon = try DaemonProcess(config: """
            [feeds.notes]
            source = "file"
            path = "\(notes)"
            follow = true
            poll = "200ms"

            [feeds.todo]
            source = "file"
            path = "\(todo)"
            follow = true
            poll = "200ms"

            [feeds.desk]
            source = "merge"
            feeds = ["notes", "todo"]
            """, directory: directory)
        let follower = try daemon.connect()
        try follower.send("follow desk")
        try follower.expect("subscribed")
        #expect(Self.ids(try follower.expect("page")) == ["notes:1", "todo:1"])
        try Self.append("buy bread\n", to: notes)
        let started = ContinuousClock.now
        #expect(Self.ids(try follower.expect("page", timeout: .seconds(3))) == ["notes:2"])
        try Self.append("water plants\n", to: todo)
        #expect(Self.ids(try follower.expect("page", timeout: .seconds(3))) == ["todo:2"])
        #expect(started.duration(to: .now) < .seconds(4), "each line came within the members' poll and a bounded delay")
        let reader = try daemon.connect()
        try reader.send("next notes 2")
        try reader.expect("subscribed")
        #expect(try [reader.expect("page"), reader.expect("page")].flatMap(Self.ids) == ["1", "2"], "the member's own readers see it too")
    }

    @Test func a_polled_rss_member_is_polled_while_only_the_merge_reads_it() throws {
        let upstream = try LoopbackUpstream()
        AggregatorAdapterTests.serve(upstream, [("a", "Sun, 01 Nov 2026 10:00:00 GMT")], entityTag: "\"1\"")
        let daemon = try DaemonProcess(config: """
            [feeds.news]
            source = "rss"
            url = "\(upstream.baseURL)/feed.xml"
            poll = "100ms"

            [feeds.desk]
            source = "merge"
            feeds = ["news"]
            """)
        let follower = try daemon.connect()
        try follower.send("follow desk")
        try follower.expect("subscribed")
        #expect(Self.ids(try follower.expect("page")) == ["news:a"])
        let before = upstream.received.count
        try upstream.waitForRequests(before + 3, timeout: .seconds(5))
        AggregatorAdapterTests.serve(upstream, [("b", "Mon, 02 Nov 2026 10:00:00 GMT"), ("a", "Sun, 01 Nov 2026 10:00:00 GMT")], entityTag: "\"2\"")
        #expect(Self.ids(try follower.expect("page", timeout: .seconds(3))) == ["news:b"])
    }

    @Test func a_ten_thousand_item_member_page_does_not_hold_up_another_clients_ping() throws {
        let directory = try TemporaryDirectory()
        let lines = (1...10_000).map { #"{"n":\#($0),"text":"line \#($0) of a wide page"}"# }.joined(separator: "\n") + "\n"
        let wide = try directory.write("wide.ndjson", lines)
        let daemon = try DaemonProcess(config: """
            [feeds.wide]
            source = "file"
            path = "\(wide)"
            page_size = 10000

            [feeds.desk]
            source = "merge"
            feeds = ["wide"]
            """, directory: directory)
        // The member's page is fetched and its items read once, off the main actor; what is
        // measured is the merged pages built from it after that.
        let first = try daemon.connect()
        try first.send("next desk")
        #expect(Self.ids(try first.read(until: "page", timeout: .seconds(30)).found).first == "wide:1")
        // Merged pages are read one by one on a thread of their own for as long as this one pings.
        let paging = Locked((stop: false, lastIDs: [String](), done: false))
        Thread {
            defer { paging.withLock { $0.done = true } }
            guard let reader = try? daemon.connect() else { return }
            while !paging.withLock({ $0.stop }), paging.withLock({ $0.lastIDs.count }) < 499 {
                guard (try? reader.send("next desk")) != nil, let page = try? reader.read(until: "page", timeout: .seconds(10)).found else { return }
                paging.withLock { $0.lastIDs.append(Self.ids(page).first ?? "") }
            }
        }.start()
        let pinger = try daemon.connect()
        let mainThreadBefore = try Self.mainThreadCPU(of: daemon)
        var latencies: [Duration] = []
        // One ping every 10 ms, so the figures sample the time the pages take, not only the pings
        // that came between them.
        var tick = ContinuousClock.now
        while latencies.count < 300, !paging.withLock({ $0.done }) {
            tick += .milliseconds(10)
            let wait = ContinuousClock.now.duration(to: tick)
            if wait > .zero { Thread.sleep(forTimeInterval: Double(wait.components.attoseconds) / 1e18) }
            let sent = ContinuousClock.now
            #expect(try pinger.request("ping")["type"] == "pong")
            latencies.append(sent.duration(to: .now))
        }
        paging.withLock { $0.stop = true }
        let mainThreadCPU = try Self.mainThreadCPU(of: daemon) - mainThreadBefore
        latencies.sort()
        let p99 = latencies[latencies.count * 99 / 100]
        let read = paging.withLock { $0.lastIDs }
        // Under 5 ms on a quiet machine; the bound leaves room for a loaded machine's scheduler.
        #expect(p99 < .milliseconds(50), "ping p99 \(p99), median \(latencies[latencies.count / 2]) over \(latencies.count) pings while \(read.count) merged pages were read")
        // The strict measure: the main thread's own CPU time is what merged pages cost the other clients.
        #expect(mainThreadCPU < .milliseconds(2) * read.count, "the main thread spent \(mainThreadCPU) on \(read.count) merged pages")
        #expect(read.count >= 50 && read.enumerated().allSatisfy { $1 == "wide:\($0 * 20 + 1)" }, "merged pages kept coming, in order: \(read.suffix(3))")
    }

    /// The CPU time the daemon's main thread has used (utime + stime of /proc/PID/task/PID/stat).
    static func mainThreadCPU(of daemon: DaemonProcess) throws -> Duration {
        let stat = try String(contentsOfFile: "/proc/\(daemon.pid)/task/\(daemon.pid)/stat", encoding: .utf8)
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        let ticks = try #require(Int(fields[11])) + #require(Int(fields[12]))
        return .milliseconds(ticks * 1000 / Int(sysconf(Int32(_SC_CLK_TCK))))
    }

    @Test func a_member_answering_404_does_not_slow_the_merged_pages_and_status_names_it() throws {
        let upstream = try LoopbackUpstream()
        let directory = try TemporaryDirectory()
        let notes = try directory.write("notes.ndjson", (1...200).map { "note \($0)" }.joined(separator: "\n") + "\n")
        let daemon = try DaemonProcess(config: """
            [feeds.notes]
            source = "file"
            path = "\(notes)"

            [feeds.api]
            source = "http"
            url = "\(upstream.baseURL)/missing?page={page}"
            items = ""
            id = "id"

            [feeds.desk]
            source = "merge"
            feeds = ["api", "notes"]
            timeout = "10s"
            """, directory: directory)
        let client = try daemon.connect()
        let started = ContinuousClock.now
        try client.send("next desk 5")
        try client.expect("subscribed")
        var pages: [JSONValue] = []
        while pages.count < 5 {
            let message = try client.read(timeout: .seconds(2))
            if message["type"] == "page" { pages.append(message) }
        }
        #expect(started.duration(to: .now) < .seconds(2), "five merged pages, not five waits on the failing member")
        #expect(pages.flatMap(Self.ids).prefix(3) == ["notes:1", "notes:2", "notes:3"])
        let status = try daemon.connect().request("status")
        let desk = status["feeds"]?.arrayValue?.first { $0["name"] == "desk" }
        let lastError = desk?["last_error"]?.stringValue ?? ""
        #expect(lastError.contains("api") && lastError.contains("404"), "\(desk?.jsonText ?? "no desk")")
    }
}
