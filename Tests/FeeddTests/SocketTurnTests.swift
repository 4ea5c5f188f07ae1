import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// A client's `ping` waits for at most one bounded turn of the event loop, however many
/// followers have pages to be written meanwhile, and goes ahead of requests that are not brief. The daemon is stopped (SIGSTOP) while the
/// crowd and the probe send, so that on SIGCONT all of it is ready at once, as under load.
@Suite struct SocketTurnTests {
    static let followers = 300

    /// A feed of 100 KB pages, the first eight cached: a follower's window of four pages is more
    /// than its socket takes, so each one's turn writes a socket buffer's worth and blocks.
    static func bigPagesDaemon() throws -> DaemonProcess {
        let directory = try TemporaryDirectory()
        let line = #"{"text":""# + String(repeating: "feedd ", count: 32) + #""}"#
        let path = try directory.write("big.ndjson", Array(repeating: line, count: 10_000).joined(separator: "\n") + "\n")
        let daemon = try DaemonProcess(config: """
            [daemon]
            prefetch = 0

            [feeds.big]
            source = "file"
            path = "\(path)"
            page_size = 500
            cache_pages = 64
            """, directory: directory)
        let warm = try daemon.connect()
        try warm.send("next big 8")
        for _ in 0..<8 { _ = try warm.read(until: "page") }
        return daemon
    }

    /// How many of `clients` have something to read now.
    static func readable(_ clients: [TestClient]) -> Int {
        var descriptors = clients.map { pollfd(fd: $0.connection.descriptor, events: Int16(POLLIN), revents: 0) }
        let ready = poll(&descriptors, nfds_t(descriptors.count), 0)
        return Int(max(ready, 0))
    }

    /// Reads and drops whatever `client`'s socket holds now.
    static func drain(_ client: TestClient) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while recv(client.connection.descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
    }

    /// Sends `ping` on `probe` while the daemon is stopped, after `crowd` was set going, lets the
    /// daemon go on, and returns how many of `others` had something to read once the `pong` came.
    static func othersServedBeforePong(
        _ daemon: DaemonProcess, probe: TestClient, others: [TestClient], crowd: () throws -> Void
    ) throws -> Int {
        daemon.send(signal: SIGSTOP)
        var resumed = false
        defer { if !resumed { daemon.send(signal: SIGCONT) } }
        try crowd()
        try probe.send("ping")
        daemon.send(signal: SIGCONT)
        resumed = true
        #expect(try probe.expect("pong", timeout: .seconds(60))["type"] == "pong")
        return readable(others)
    }

    /// What the probe did before the crowd of new followers asks, and when it connected.
    enum ProbeHistory {
        /// Connected and pinged before the followers connected: served less lately than they were.
        case pingedBeforeTheCrowdConnected
        /// Connected after them and pinged: the most recently served of all.
        case pingedAfterTheCrowdConnected
        /// Connected after them and asked nothing yet: the fan-out's first ping.
        case connectedAfterTheCrowd
    }

    /// Connects the probe and the followers as `history` says; then, the daemon stopped, each
    /// follower sends `follow big` (its turn writes a socket buffer's worth of pages) and the probe
    /// `ping`. Returns how many followers had been served when the `pong` came; reads each one's
    /// first page.
    static func followersServedBeforePong(_ history: ProbeHistory) throws -> Int {
        let daemon = try bigPagesDaemon()
        var probe: TestClient?
        if history == .pingedBeforeTheCrowdConnected {
            probe = try daemon.connect()
            _ = try probe?.request("ping")
        }
        let followers = try (0..<Self.followers).map { _ in try daemon.connect() }
        if probe == nil {
            probe = try daemon.connect()
            if history == .pingedAfterTheCrowdConnected { _ = try probe?.request("ping") }
        }
        let served = try othersServedBeforePong(daemon, probe: probe!, others: followers) {
            for follower in followers { try follower.send("follow big") }
        }
        for follower in followers { _ = try follower.read(until: "page", timeout: .seconds(60)) }
        return served
    }

    @Test func a_ping_does_not_wait_for_a_crowd_of_new_followers_first_windows() throws {
        let served = try Self.followersServedBeforePong(.pingedBeforeTheCrowdConnected)
        // Taken as never served, the new connections all went first: every one of them had its
        // window written before the `pong`.
        #expect(served < Self.followers / 2, "\(served) of \(Self.followers) followers were served before the ping")
    }

    @Test func a_ping_does_not_wait_for_a_crowd_of_followers_with_room_to_write() throws {
        let daemon = try Self.bigPagesDaemon()
        let probe = try daemon.connect()
        let followers = try (0..<Self.followers).map { _ in try daemon.connect() }
        for follower in followers { try follower.send("follow big") }
        // Each one's socket full, its window not written yet: the daemon waits for room.
        for follower in followers { _ = try follower.read(until: "subscribed", timeout: .seconds(60)) }
        _ = try probe.request("ping")
        let served = try Self.othersServedBeforePong(daemon, probe: probe, others: followers) {
            for follower in followers { Self.drain(follower) }
        }
        // Sockets with only room to write were all served in the turn epoll reported them, before
        // any request of that turn.
        #expect(served < Self.followers / 2, "\(served) of \(Self.followers) followers were written to before the ping")
        for follower in followers { _ = try follower.read(until: "page", timeout: .seconds(60)) }
    }

    // MARK: Brief requests first

    @Test func a_ping_goes_ahead_of_a_crowd_that_was_served_less_lately() throws {
        let served = try Self.followersServedBeforePong(.pingedAfterTheCrowdConnected)
        // By recency alone, the client that pings every millisecond went behind every one of them.
        #expect(served < Self.followers / 2, "\(served) of \(Self.followers) followers were served before the ping")
    }

    @Test func a_new_connections_first_ping_goes_ahead_of_a_crowd_of_new_followers() throws {
        let served = try Self.followersServedBeforePong(.connectedAfterTheCrowd)
        // Only its input told that it asks little: it waited for every new follower's first window.
        #expect(served < Self.followers / 2, "\(served) of \(Self.followers) followers were served before the ping")
    }
}
