import FeedClient
import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// Starting, stopping, the socket file, the default config and check-config (SPEC §2).
@Suite struct LifecycleTests {
    @Test func sigterm_says_bye_to_every_client_and_exits_zero() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let clients = try (0..<3).map { _ in try daemon.connect() }
        try clients[0].send("follow numbers")
        try clients[0].expect("subscribed")
        daemon.send(signal: SIGTERM)
        for client in clients {
            let (_, bye) = try client.read(until: "bye")
            #expect(bye["reason"] == "shutting down")
            #expect(try client.isClosedByDaemon())
        }
        #expect(try daemon.waitForExit() == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath), "the daemon removes the socket it created")
    }

    @Test func sigint_stops_it_too() throws {
        let daemon = try ProtocolTests.numbersFeed()
        daemon.send(signal: SIGINT)
        #expect(try daemon.waitForExit() == 0)
    }

    @Test func a_stale_socket_file_is_replaced() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("feedd.sock")
        let address = try UnixSocketAddress(path: path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #expect(address.withSocketAddress { bind(descriptor, $0, $1) } == 0)
        close(descriptor)
        #expect(FileManager.default.fileExists(atPath: path))
        let daemon = try DaemonProcess(config: "", directory: directory)
        #expect(try daemon.connect().request("ping")["type"] == "pong")
    }

    @Test func a_live_socket_is_never_taken_over() throws {
        let first = try ProtocolTests.numbersFeed()
        let second = try DaemonProcess(
            config: "", arguments: ["--config", first.configPath, "--socket", first.socketPath], waitUntilListening: false)
        #expect(try second.waitForExit() == 1)
        #expect(second.log.text.contains("already listening on \(first.socketPath)"))
        #expect(try first.connect().request("ping")["type"] == "pong")
    }

    @Test func a_path_that_is_not_a_socket_is_left_alone() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("feedd.sock", "precious")
        let daemon = try DaemonProcess(config: "", directory: directory, waitUntilListening: false)
        #expect(try daemon.waitForExit() == 1)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "precious")
    }

    @Test func without_a_config_file_the_embedded_default_serves_the_sample_feed() throws {
        let directory = try TemporaryDirectory()
        let daemon = try DaemonProcess(
            config: "", arguments: [], environment: ["XDG_RUNTIME_DIR": directory.path], directory: directory)
        try daemon.log.waitForLine(containing: "listening on \(directory.path)/feedd.sock")
        let client = try daemon.connect()
        try client.send("next sample 2")
        try client.expect("subscribed")
        let first = try client.expect("page")
        _ = try client.expect("page")
        #expect(first["items"]?.arrayValue?.first?["data"] == ["number": 1, "symbol": "H", "name": "Hydrogen"])
        try client.send("next sample 20")
        let (pages, end) = try client.read(until: "end")
        #expect(pages.last?["last"] == true)
        #expect(end["page"] == 12, "118 elements, ten to a page")
    }

    @Test func bad_arguments_exit_two() throws {
        let daemon = try DaemonProcess(config: "", arguments: ["--frobnicate"], waitUntilListening: false)
        #expect(try daemon.waitForExit() == 2)
        #expect(daemon.log.text.contains("unknown argument"))
    }

    @Test func an_invalid_config_at_start_exits_two_with_the_problem() throws {
        let daemon = try DaemonProcess(config: "[feeds.x]\nsource = \"nope\"\n", waitUntilListening: false)
        #expect(try daemon.waitForExit() == 2)
        #expect(daemon.log.text.contains("feedd.toml:2:1: feeds.x.source: unknown source \"nope\""))
    }
}

/// Who may connect, and what a client hears while the daemon stops.
@Suite struct AccessAndShutdownTests {
    @Test func a_peer_outside_allow_uids_is_forbidden_and_closed() throws {
        let daemon = try ProtocolTests.numbersFeed(extraDaemon: "allow_uids = [\(getuid() + 4242)]")
        let client = try TestClient(path: daemon.socketPath)
        let error = try client.expect("error")
        #expect(error["code"] == "forbidden")
        #expect(try client.isClosedByDaemon())
        try daemon.log.waitForLine(containing: "refused connection from pid")
    }

    @Test func a_peer_in_allow_uids_is_served() throws {
        let daemon = try ProtocolTests.numbersFeed(extraDaemon: "allow_uids = [\(getuid())]")
        #expect(try daemon.connect().request("ping")["type"] == "pong")
    }

    @Test func the_socket_gets_the_configured_mode() throws {
        let daemon = try ProtocolTests.numbersFeed(extraDaemon: "socket_mode = \"0600\"")
        let attributes = try FileManager.default.attributesOfItem(atPath: daemon.socketPath)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test func the_socket_gets_the_configured_group() throws {
        let group = try #require(getgrnam("nogroup"), "Debian's nogroup").pointee.gr_gid
        let daemon = try ProtocolTests.numbersFeed(extraDaemon: "socket_group = \"nogroup\"\nsocket_mode = \"0660\"")
        var info = stat()
        #expect(stat(daemon.socketPath, &info) == 0)
        #expect(info.st_gid == group)
        #expect(info.st_mode & 0o777 == 0o660)
    }

    @Test func a_client_arriving_during_shutdown_is_told_shutting_down() throws {
        let directory = try TemporaryDirectory()
        let line = #"{"text":""# + String(repeating: "x", count: 2000) + #""}"#
        let path = try directory.write("big.ndjson", Array(repeating: line, count: 5_000).joined(separator: "\n"))
        let daemon = try DaemonProcess(config: "[feeds.big]\nsource = \"file\"\npath = \"\(path)\"\npage_size = 100\n", directory: directory)
        // A follower that stops reading keeps its goodbye from being written, so shutdown lasts its
        // full grace period. Once the watcher has page 10, the follower has been offered pages 1…10
        // (2 MB, far more than a socket buffer holds), so its queue cannot be empty.
        let stuck = try daemon.connect()
        try stuck.send("follow big")
        try stuck.expect("subscribed")
        let watcher = try daemon.connect()
        try watcher.send("next big 10")
        let (_, tenth) = try watcher.read(until: "page")
        for _ in 2...10 { _ = try watcher.expect("page") }
        _ = tenth
        daemon.send(signal: SIGTERM)
        _ = try watcher.read(until: "bye")
        let late = try TestClient(path: daemon.socketPath)
        let error = try late.expect("error")
        #expect(error["code"] == "shutting_down")
        #expect(try daemon.waitForExit() == 0)
        _ = stuck
    }
}
