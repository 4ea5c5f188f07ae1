import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// The daemon's durable state (issue 13): one daemon per state directory, generations that
/// follow what shapes a feed's pages across restarts, and `store_failed` when a write cannot be
/// made durable.
@Suite struct DurableStateTests {
    private static func config(state: String, numbers: String, pageSize: Int = 1) -> String {
        """
        [daemon]
        state_dir = "\(state)"
        # Nothing is fetched ahead, so status counts exactly the pages asked for.
        prefetch = 0
        [feeds.numbers]
        source = "file"
        path = "\(numbers)"
        page_size = \(pageSize)
        """
    }

    private static func numbers(in directory: TemporaryDirectory, lines: Int = 100) throws -> String {
        try directory.write("numbers.ndjson", (1...lines).map(String.init).joined(separator: "\n") + "\n")
    }

    @Test func test_a_second_daemon_on_the_same_state_directory_exits_1_naming_it_and_the_pid() throws {
        let directory = try TemporaryDirectory()
        let state = directory.path("state")
        let numbers = try Self.numbers(in: directory)
        let first = try DaemonProcess(config: Self.config(state: state, numbers: numbers))
        let second = try DaemonProcess(config: Self.config(state: state, numbers: numbers), waitUntilListening: false)
        #expect(try second.waitForExit() == 1)
        #expect(second.log.text.contains("the state directory \(state) is in use by another feedd (pid \(first.pid)"))
        #expect(try first.connect().request("ping")["type"] == "pong")
    }

    @Test func test_a_restart_keeps_the_generation_unless_the_pages_change_shape() throws {
        let directory = try TemporaryDirectory()
        let state = directory.path("state")
        let numbers = try Self.numbers(in: directory)
        var daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers, pageSize: 5), directory: directory)
        var client = try daemon.connect()
        _ = try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"dora"}"#)
        try client.send("next numbers 3")
        for _ in 0..<3 { try client.expect("page") }
        #expect(try client.request("ack numbers 3")["page"] == 3)
        daemon.send(signal: SIGKILL)
        _ = try daemon.waitForExit()

        // Same config: same generation, dora resumes after page 3.
        daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers, pageSize: 5), directory: directory)
        client = try daemon.connect()
        let resumed = try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"dora"}"#)
        #expect(resumed["generation"] == 1 && resumed["after"] == 3)
        try client.send("next numbers")
        let page = try client.expect("page")
        #expect(page["page"] == 4 && page["items"]?.arrayValue?.first?["id"] == "16")
        // A file's pages are asked for by number: page 4 costs one request, pages 1 to 3 none.
        #expect(try client.request("status")["feeds"]?.arrayValue?.first?["upstream_requests"] == 1)
        daemon.send(signal: SIGKILL)
        _ = try daemon.waitForExit()

        // page_size changed: a new generation, dora back at 0 (duplicates, never a gap).
        daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers, pageSize: 7), directory: directory)
        let reshaped = try daemon.connect().request(#"{"op":"subscribe","feed":"numbers","consumer":"dora"}"#)
        #expect(reshaped["generation"] == 2 && reshaped["after"] == 0)
    }

    @Test func test_a_full_disk_answers_store_failed_and_changes_nothing() throws {
        let directory = try TemporaryDirectory()
        guard let disk = SmallDisk(in: directory) else { return }
        defer { disk.unmount() }
        let mountPoint = disk.path
        let numbers = try Self.numbers(in: directory)
        let daemon = try DaemonProcess(config: Self.config(state: "\(mountPoint)/state", numbers: numbers), directory: directory)
        let client = try daemon.connect()
        _ = try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"dora"}"#)
        try client.send("next numbers 5")
        for _ in 0..<5 { try client.expect("page") }
        #expect(try client.request("ack numbers 2")["page"] == 2)

        // Fill the disk: acks and refresh fail with store_failed, and nothing moves.
        let filler = disk.fill()
        var failed: JSONValue?
        for page in 3...5 where failed == nil {
            let reply = try client.request("ack numbers \(page)")
            if reply["type"] == "error" { failed = reply }
        }
        #expect(failed?["code"] == "store_failed")
        #expect(failed?["message"]?.stringValue?.contains("the disk is full") == true)
        let refreshed = try client.request("refresh numbers")
        #expect(refreshed["code"] == "store_failed")
        let status = try client.request("status")
        #expect(status["feeds"]?.arrayValue?.first?["generation"] == 1)

        // Room again: the same acks work.
        try FileManager.default.removeItem(atPath: filler)
        #expect(try client.request("ack numbers 5")["page"] == 5)
        daemon.send(signal: SIGKILL)
        _ = try daemon.waitForExit()
        let again = try DaemonProcess(config: Self.config(state: "\(mountPoint)/state", numbers: numbers), directory: directory)
        #expect(try again.connect().request(#"{"op":"subscribe","feed":"numbers","consumer":"dora"}"#)["after"] == 5)
    }
}
