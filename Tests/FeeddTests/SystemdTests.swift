import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// SPEC §6 without systemd: a datagram socket as NOTIFY_SOCKET, systemd-socket-activate, signals.
@Suite struct SystemdTests {
    static func config(feeds: [String], in directory: TemporaryDirectory) throws -> String {
        let path = try directory.write("data.ndjson", (1...50).map { "line \($0)" }.joined(separator: "\n") + "\n")
        return feeds.map { "[feeds.\($0)]\nsource = \"file\"\npath = \"\(path)\"\npage_size = 5\n" }.joined(separator: "\n")
    }

    @Test func ready_comes_once_the_socket_accepts_then_status_follows_the_clients() throws {
        let directory = try TemporaryDirectory()
        let notify = try NotifyListener(in: directory)
        let daemon = try DaemonProcess(
            config: try Self.config(feeds: ["notes"], in: directory), environment: ["NOTIFY_SOCKET": notify.path],
            directory: directory, waitUntilListening: false)
        try notify.waitFor("READY=1")
        let client = try daemon.connect()
        #expect(try client.request("ping")["type"] == "pong", "the socket accepts by the time READY=1 is sent")
        let status = try notify.waitFor("STATUS=1 feed, 1 client;")
        #expect(status.contains("notes ok"))
        client.connection.finishSending()
        #expect(try client.isClosedByDaemon())
        try notify.waitFor("STATUS=1 feed, 0 clients;")
    }

    @Test func watchdog_pings_at_half_the_interval() throws {
        let directory = try TemporaryDirectory()
        let notify = try NotifyListener(in: directory)
        let daemon = try DaemonProcess(
            config: try Self.config(feeds: ["notes"], in: directory),
            environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"], directory: directory)
        try notify.waitFor("WATCHDOG=1", count: 6)
        #expect(daemon.isRunning)
        let pings = notify.arrivals(of: "WATCHDOG=1")
        let span = pings[5] - pings[0]
        #expect(span >= .milliseconds(5 * 180), "five intervals of 200 ms took \(span)")
        #expect(span < .milliseconds(5 * 400), "five intervals must stay under the 400 ms watchdog, took \(span)")
    }

    @Test func sighup_reloads_and_sigterm_says_stopping() throws {
        let directory = try TemporaryDirectory()
        let notify = try NotifyListener(in: directory)
        let daemon = try DaemonProcess(
            config: try Self.config(feeds: ["notes"], in: directory), environment: ["NOTIFY_SOCKET": notify.path],
            directory: directory)
        try notify.waitFor("READY=1")
        daemon.send(signal: SIGHUP)
        let reloading = try notify.waitFor("RELOADING=1")
        let monotonic = reloading.split(separator: "\n").first { $0.hasPrefix("MONOTONIC_USEC=") }
        #expect(monotonic.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) } != nil, "\(reloading)")
        try notify.waitFor("READY=1", count: 2)
        let readyAfterReload = try #require(notify.received.lastIndex { $0.contains("READY=1") })
        let reloadIndex = try #require(notify.received.firstIndex { $0.contains("RELOADING=1") })
        #expect(readyAfterReload > reloadIndex)
        daemon.send(signal: SIGTERM)
        try notify.waitFor("STOPPING=1")
        #expect(try daemon.waitForExit() == 0)
    }

    @Test func a_feed_added_by_sighup_appears_while_subscriptions_carry_on() throws {
        let directory = try TemporaryDirectory()
        let daemon = try DaemonProcess(config: try Self.config(feeds: ["notes"], in: directory), directory: directory)
        let reader = try daemon.connect()
        try reader.send("next notes")
        _ = try reader.read(until: "page")
        try Self.config(feeds: ["notes", "extra"], in: directory).write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        try daemon.log.waitForLine(containing: "configuration reloaded")
        let newcomer = try TestClient(path: daemon.socketPath)
        #expect(try newcomer.expect("hello")["feeds"] == ["extra", "notes"])
        #expect(try newcomer.request("next extra")["type"] == "subscribed")
        try reader.send("next notes")
        let page = try reader.expect("page")
        #expect(page["page"] == 2 && page["generation"] == 1, "the unchanged feed's subscriber noticed nothing")
    }

    @Test func a_changed_feed_moves_its_subscribers_to_a_new_generation() throws {
        let directory = try TemporaryDirectory()
        let config = try Self.config(feeds: ["notes"], in: directory)
        let daemon = try DaemonProcess(config: config, directory: directory)
        let reader = try daemon.connect()
        try reader.send("next notes")
        _ = try reader.read(until: "page")
        try config.replacingOccurrences(of: "page_size = 5", with: "page_size = 7")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        #expect(try reader.expect("refreshed")["generation"] == 2)
        try reader.send("next notes")
        let page = try reader.expect("page")
        #expect(page["page"] == 1 && page["items"]?.arrayValue?.count == 7)
    }

    @Test func a_broken_config_on_sighup_leaves_the_old_feeds_serving() throws {
        let directory = try TemporaryDirectory()
        let notify = try NotifyListener(in: directory)
        let daemon = try DaemonProcess(
            config: try Self.config(feeds: ["notes"], in: directory), environment: ["NOTIFY_SOCKET": notify.path],
            directory: directory)
        let reader = try daemon.connect()
        try reader.send("next notes")
        _ = try reader.read(until: "page")
        try "[feeds.notes\nsource = 1\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        let line = try daemon.log.waitForLine(containing: "reload rejected")
        #expect(line.contains("feedd.toml:1:"))
        try notify.waitFor("STATUS=1 feed, 1 client; notes ok; reload rejected: ")
        try reader.send("next notes")
        #expect(try reader.expect("page")["page"] == 2)
        #expect(daemon.isRunning)
    }

    @Test func a_socket_passed_by_systemd_socket_activate_is_served_and_kept() throws {
        let directory = try TemporaryDirectory()
        let socketPath = directory.path("activated.sock")
        try directory.write("feedd.toml", try Self.config(feeds: ["notes"], in: directory))
        let daemon = try DaemonProcess(
            config: try Self.config(feeds: ["notes"], in: directory),
            executable: "/usr/bin/systemd-socket-activate",
            arguments: ["--listen=\(socketPath)"]
                + Sanitizer.optionVariables.filter { ProcessInfo.processInfo.environment[$0] != nil }.map { "--setenv=\($0)" }
                + [FeeddBinaries.feedd, "--config", directory.path("feedd.toml")],
            directory: directory, waitUntilListening: false)
        try daemon.log.waitForLine(containing: "Listening on")
        let client = try TestClient(path: socketPath)
        let hello = try client.expect("hello")
        #expect(hello["feeds"] == ["notes"])
        try daemon.log.waitForLine(containing: "listening on the socket passed by systemd")
        #expect(try client.request("next notes")["type"] == "subscribed")
        daemon.send(signal: SIGTERM)
        _ = try client.read(until: "bye")
        #expect(try daemon.waitForExit() == 0)
        #expect(FileManager.default.fileExists(atPath: socketPath), "a passed socket is never unlinked by feedd")
    }

    @Test func a_journal_stream_that_is_not_stderr_leaves_the_lines_as_they_are() throws {
        let directory = try TemporaryDirectory()
        let daemon = try DaemonProcess(
            config: try Self.config(feeds: ["notes"], in: directory), environment: ["JOURNAL_STREAM": "8:12345"],
            directory: directory, waitUntilListening: false)
        let line = try daemon.log.waitForLine(containing: "listening on")
        #expect(line.hasPrefix("notice: "), "\(line)")
    }

    /// When stderr is the journal stream, records go to journald through sd_journal_sendv(3)
    /// and not to stderr. (libsystemd drops them silently when no journald listens, as on a
    /// build host; Tests/systemd-e2e reads them back from a real journal.)
    @Test func a_journal_stream_that_is_stderr_sends_records_to_journald_not_stderr() throws {
        let directory = try TemporaryDirectory()
        let config = try directory.write("feedd.toml", try Self.config(feeds: ["notes"], in: directory))
        let socketPath = directory.path("feedd.sock")
        // The shell names its stderr (the daemon's log pipe) in JOURNAL_STREAM, as systemd would.
        let daemon = try DaemonProcess(
            config: String(contentsOfFile: config, encoding: .utf8), executable: "/bin/sh",
            arguments: ["-c", #"JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) exec "$0" --config "$1" --socket "$2""#,
                FeeddBinaries.feedd, config, socketPath],
            directory: directory, waitUntilListening: false)
        let deadline = ContinuousClock.now + .seconds(15)
        var client: TestClient?
        while client == nil {
            guard ContinuousClock.now < deadline, daemon.isRunning else { throw TestFailure("feedd did not listen within 15 s") }
            client = try? TestClient(path: socketPath)
            if client == nil { Thread.sleep(forTimeInterval: 0.02) }
        }
        #expect(try client?.read()["type"] == "hello")
        daemon.send(signal: SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        #expect(daemon.log.lines.isEmpty, "\(daemon.log.lines)")
    }

    @Test func log_level_hides_lower_levels() throws {
        let directory = try TemporaryDirectory()
        let daemon = try DaemonProcess(
            config: "[daemon]\nlog_level = \"warning\"\n" + (try Self.config(feeds: ["notes"], in: directory)),
            directory: directory, waitUntilListening: false)
        daemon.send(signal: SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        #expect(daemon.log.lines.allSatisfy { $0.hasPrefix("warning:") || $0.hasPrefix("error:") }, "\(daemon.log.lines)")
    }
}
