import FeedClient
import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// Issue 14: no client, config or resource limit can crash, stall or open feedd.
@Suite struct HostileInputTests {
    @Test func a_cursor_near_int_max_is_a_bad_request_and_the_daemon_lives() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        for line in [
            "subscribe numbers 9223372036854775807", "subscribe numbers 9223372036854775806",
            #"{"op":"subscribe","feed":"numbers","consumer":"evil","after":9223372036854775807}"#,
            #"{"op":"subscribe","feed":"numbers","after":9223372036854775806,"follow":true}"#,
            #"{"op":"ack","feed":"numbers","page":9223372036854775807}"#,
        ] {
            let reply = try client.request(line)
            #expect(reply["code"] == "bad_request", "\(line) → \(reply.jsonText)")
        }
        #expect(try client.request("next numbers")["type"] == "subscribed")
        #expect(try client.read()["page"] == 1)
        #expect(daemon.isRunning)
    }

    @Test func bad_consumer_names_are_bad_requests() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        for name in ["../x\\n", "", String(repeating: "n", count: 60_000)] {
            let reply = try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"\#(name)"}"#)
            #expect(reply["code"] == "bad_request", "\(name.prefix(10)) → \(reply.jsonText.prefix(200))")
        }
        #expect(try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"reader-1.prod"}"#)["type"] == "subscribed")
    }

    @Test func an_id_comes_back_exactly_as_sent() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        for id in ["123456789012345678901234567890", "1.50", "-0.0e+10", #"{"b":1, "a":[ 2 ]}"#] {
            try client.send(#"{"op":"ping","id":\#(id)}"#)
            let line = String(decoding: try #require(try client.connection.readLine()), as: UTF8.self)
            #expect(line == #"{"type":"pong","id":\#(id)}"#)
        }
        try client.send(#"{"op":"next","feed":"numbers","id":123456789012345678901234567890}"#)
        for _ in 0..<2 {
            let line = String(decoding: try #require(try client.connection.readLine()), as: UTF8.self)
            #expect(line.hasSuffix(#","id":123456789012345678901234567890}"#), "\(line.prefix(80))")
        }
    }

    @Test func a_last_line_without_newline_before_half_close_is_answered() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        try client.connection.sendRaw(Array("ping\nnext numbers".utf8))
        client.connection.finishSending()
        let messages = try client.readUntilClosed(timeout: .seconds(5))
        #expect(messages.map { $0["type"]?.stringValue } == ["pong", "subscribed", "page"])
    }

    /// A client writes 256 KB of `status` lines and never reads: the daemon stops reading it once
    /// its unread answers are over the bound, answers everyone else at once, and keeps no backlog.
    @Test func a_pipelined_flood_stalls_no_one_and_keeps_no_memory() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let idle = try (0..<300).map { _ in try daemon.connect() }
        let bystander = try daemon.connect()
        let before = try daemon.memory("RssAnon")
        let flooder = try daemon.connect()
        let flood = Array([[UInt8]](repeating: Array("status\n".utf8), count: 256 * 1024 / 7).joined())
        let descriptor = flooder.connection.descriptor
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        var offset = 0
        let deadline = ContinuousClock.now + .seconds(5)
        // Write until the daemon stops reading (the socket stays full) or everything is sent.
        while offset < flood.count, ContinuousClock.now < deadline {
            let written = flood[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written > 0 { offset += written } else { Thread.sleep(forTimeInterval: 0.01) }
            let started = ContinuousClock.now
            #expect(try bystander.request("ping")["type"] == "pong")
            #expect(ContinuousClock.now - started < .seconds(1), "the daemon answered a ping late")
        }
        #expect(offset < flood.count, "the daemon should have stopped reading the flooder's requests")
        let started = ContinuousClock.now
        #expect(try bystander.request("ping")["type"] == "pong")
        #expect(ContinuousClock.now - started < .seconds(1))
        if !Sanitizer.isActive {
            let grown = try daemon.memory("RssAnon") - before
            #expect(grown < 64 * 1024, "RssAnon grew by \(grown) kB")
        }
        let status = try bystander.request("status")
        #expect(status["clients"] == .integer(Int64(idle.count + 2)))
        #expect(status["peers"]?.arrayValue?.count == 100, "status lists at most 100 peers")
    }

    /// Under `ulimit -n 80`, 100 clients: those admitted (about 40, past the daemon's own
    /// descriptors and the 20 it keeps) are served, the rest wait in the listen queue and are
    /// accepted once descriptors free up; one log line per episode.
    @Test func running_out_of_descriptors_keeps_serving_and_accepts_again() throws {
        let directory = try TemporaryDirectory()
        let data = try directory.write("numbers.ndjson", "1\n2\n3\n")
        let command = "ulimit -n 80 && exec \(FeeddBinaries.feedd) --config \(directory.path("feedd.toml")) --socket \(directory.path("feedd.sock"))"
        let daemon = try DaemonProcess(
            config: "[feeds.numbers]\nsource = \"file\"\npath = \"\(data)\"\n", executable: "/bin/sh", arguments: ["-c", command],
            directory: directory)
        var clients = try (0..<100).map { _ in try TestClient(path: daemon.socketPath) }
        try daemon.log.waitForLine(containing: "out of file descriptors")
        for index in 0..<10 {
            try clients[index].expect("hello")
            #expect(try clients[index].request("ping")["type"] == "pong")
        }
        #expect(daemon.isRunning)
        // Most of them leave, one by one: those still waiting are let in, and the episode
        // ends once none is left waiting.
        clients.removeFirst(70)
        for client in clients { try client.expect("hello", timeout: .seconds(10)) }
        try daemon.log.waitForLine(containing: "file descriptors are available again")
        #expect(daemon.log.lines.filter { $0.contains("out of file descriptors") }.count == 1)
        #expect(daemon.isRunning)
        #expect(daemon.log.lines.contains { $0.contains("open files limit (RLIMIT_NOFILE) is 80, too low for max_clients = 10000") })
    }

    @Test func connection_churn_is_summarised_not_logged_line_by_line() throws {
        let daemon = try ProtocolTests.numbersFeed()
        for _ in 0..<60 { _ = try daemon.connect() }
        try daemon.log.waitForLine(containing: "more connections accepted or refused", timeout: .seconds(15))
        #expect(daemon.log.lines.filter { $0.contains("client connected") }.count <= 20)
    }

    /// A config of 30 MB takes seconds to parse: clients are answered meanwhile.
    @Test func a_large_config_is_parsed_off_the_main_loop_on_reload() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        var config = try String(contentsOfFile: daemon.configPath, encoding: .utf8) + "\n"
        let comment = "# " + String(repeating: "x", count: 70) + "\n"
        config += String(repeating: comment, count: 400_000)
        try config.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        var slowest: Duration = .zero
        var reloaded = false
        let deadline = ContinuousClock.now + .seconds(60)
        while !reloaded, ContinuousClock.now < deadline {
            let started = ContinuousClock.now
            #expect(try client.request("ping")["type"] == "pong")
            slowest = max(slowest, ContinuousClock.now - started)
            reloaded = daemon.log.lines.contains { $0.contains("configuration reloaded") }
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(reloaded)
        #expect(slowest < .milliseconds(500), "a ping took \(slowest) during the reload")
    }

    /// The unit gives feedd enough descriptors for the default `max_clients` and its own needs.
    @Test func the_service_unit_sets_a_descriptor_limit_that_fits_max_clients() throws {
        let unit = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../systemd/feedd.service").standardized.path
        let text = try String(contentsOfFile: unit, encoding: .utf8)
        let limit = text.split(separator: "\n").first { $0.hasPrefix("LimitNOFILE=") }.flatMap { Int($0.dropFirst("LimitNOFILE=".count)) }
        #expect((limit ?? 0) >= 10_000 + 256, "LimitNOFILE=\(limit.map(String.init) ?? "unset")")
    }

    /// Clients never take the daemon's last descriptors: with 60 waiting under `ulimit -n 40`, a
    /// feed still opens its file, and the daemon lives on past libdispatch's once-a-second look
    /// at its workers (which opens a file for each, and traps if it cannot).
    @Test func clients_out_of_descriptors_leave_the_feeds_theirs() throws {
        let directory = try TemporaryDirectory()
        let data = try directory.write("numbers.ndjson", "1\n2\n3\n")
        let command = "ulimit -n 40 && exec \(FeeddBinaries.feedd) --config \(directory.path("feedd.toml")) --socket \(directory.path("feedd.sock"))"
        let daemon = try DaemonProcess(
            config: "[feeds.numbers]\nsource = \"file\"\npath = \"\(data)\"\n", executable: "/bin/sh",
            arguments: ["-c", command], directory: directory)
        let reader = try daemon.connect()
        var clients = try (0..<60).map { _ in try TestClient(path: daemon.socketPath) }
        try daemon.log.waitForLine(containing: "out of file descriptors")
        #expect(daemon.log.lines.contains { $0.contains("out of file descriptors for clients (the last 10 of 40 are kept for feeds") })
        try reader.send("next numbers")
        let (skipped, page) = try reader.read(until: "page")
        #expect(skipped.allSatisfy { $0["type"] == "subscribed" }, "\(skipped.map(\.jsonText))")
        #expect(page["items"]?.arrayValue?.count == 3)
        // Across more than one of libdispatch's looks (a second apart): nothing here to await.
        for _ in 0..<3 {
            Thread.sleep(forTimeInterval: 0.4)
            #expect(try reader.request("ping")["type"] == "pong")
        }
        #expect(daemon.isRunning)
        #expect(!daemon.log.lines.contains { $0.contains("cannot open") })
        clients.removeAll()
        try daemon.log.waitForLine(containing: "file descriptors are available again")
    }

    /// The HTTP front keeps the same descriptors: past them a new connection is closed at once,
    /// and the feeds, the socket's clients and the daemon carry on.
    @Test func http_clients_out_of_descriptors_leave_the_feeds_theirs() throws {
        let directory = try TemporaryDirectory()
        let data = try directory.write("numbers.ndjson", "1\n2\n3\n")
        let command = "ulimit -n 48 && exec \(FeeddBinaries.feedd) --config \(directory.path("feedd.toml")) --socket \(directory.path("feedd.sock"))"
        let daemon = try DaemonProcess(
            config: "[http]\nlisten = [\"127.0.0.1:0\"]\n\n[feeds.numbers]\nsource = \"file\"\npath = \"\(data)\"\n",
            executable: "/bin/sh", arguments: ["-c", command], directory: directory)
        let port = try HTTPWorld.port(in: daemon.log)
        let reader = try daemon.connect()
        let held = try (0..<60).map { _ in try LoopbackSocket.connect(port: port) }
        defer { for descriptor in held { close(descriptor) } }
        try daemon.log.waitForLine(containing: "out of file descriptors for clients (the last 12 of 48 are kept for feeds")
        try reader.send("next numbers")
        #expect(try reader.read(until: "page").found["items"]?.arrayValue?.count == 3)
        // Across more than one of libdispatch's looks (a second apart): nothing here to await.
        for _ in 0..<3 {
            Thread.sleep(forTimeInterval: 0.4)
            #expect(try reader.request("ping")["type"] == "pong")
        }
        #expect(daemon.isRunning)
        #expect(!daemon.log.lines.contains { $0.contains("cannot open") })
    }
}
