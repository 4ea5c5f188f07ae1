import FeedClient
import FeedKit
import Foundation
import Glibc
import TestSupport

/// The HTTP front (SPEC §11) against the socket, in the same daemon: Server-Sent Events fan-out
/// and the latency of a prefetched page.
enum HTTPScenarios {
    /// Measures and records every figure of the scenario.
    @MainActor
    static func run(subscribers: Int) throws {
        let fanOut = try fanOut(subscribers: subscribers, pages: 20, rounds: 3)
        record("fan-out of a \(fanOut.pageBytes / 1000) KB page to \(grouped(subscribers)) followers, socket", "pages/s", fanOut.socket.rate)
        record("the same as Server-Sent Events, HTTP on a Unix socket", "pages/s", fanOut.events.rate)
        record("the same as Server-Sent Events, HTTP on loopback TCP", "pages/s", fanOut.eventsOverTCP.rate)
        record("events / socket fan-out (Unix socket both)", "×", fanOut.events.rate / fanOut.socket.rate)
        record("daemon CPU per page delivered, socket", "µs", fanOut.socket.cpu)
        record("daemon CPU per page delivered, events on a Unix socket", "µs", fanOut.events.cpu)
        record("daemon CPU per page delivered, events on TCP", "µs", fanOut.eventsOverTCP.cpu)
        let latency = try pageLatency(rounds: 5, samples: 200, pause: .milliseconds(30), upstreamLatency: .milliseconds(20))
        record("GET …/pages, prefetched page, p50", "ms", latency.http.p50)
        record("GET …/pages, prefetched page, p99 of all", "ms", latency.http.p99)
        for p99 in latency.httpRoundP99s { record("GET …/pages, p99 of a round of 200", "ms", p99) }
        record("the same GET over the Unix socket, p50", "ms", latency.httpOverUnix.p50)
        record("the same GET over the Unix socket, p99 of all", "ms", latency.httpOverUnix.p99)
        record("socket next, prefetched page, same daemon, p50", "ms", latency.socket.p50)
        record("socket next, prefetched page, same daemon, p99 of all", "ms", latency.socket.p99)
        for p99 in latency.socketRoundP99s { record("socket next, p99 of a round of 200", "ms", p99) }
        record("daemon main thread CPU per GET over TCP", "µs", latency.cpuPerGet)
        record("daemon main thread CPU per socket next", "µs", latency.cpuPerNext)
    }

    /// A daemon serving `users` (randomuser on a loopback upstream) on its socket and on HTTP.
    struct World {
        let upstream: LoopbackUpstream
        let daemon: DaemonProcess
        let port: Int
        let unixPath: String

        init(upstreamLatency: Duration, feedOptions: String) throws {
            upstream = try LoopbackUpstream()
            upstream.setLatency(upstreamLatency)
            let directory = try TemporaryDirectory()
            unixPath = directory.path("http.sock")
            daemon = try DaemonProcess(config: """
                [daemon]
                max_clients = 20000
                log_level = "notice"

                [http]
                listen = ["127.0.0.1:0", "\(unixPath)"]

                [feeds.users]
                source = "randomuser"
                url = "\(upstream.baseURL)/api/"
                seed = "bench"
                \(feedOptions)
                """, directory: directory)
            let line = try daemon.log.waitForLine(containing: "HTTP listening on 127.0.0.1:")
            guard let port = line.components(separatedBy: "127.0.0.1:").last.flatMap({ Int($0) }) else { throw TestFailure("no port in \(line)") }
            self.port = port
        }

        /// A connection to the HTTP front, on its Unix socket or on TCP.
        func connect(unix: Bool = false) throws -> Int32 {
            if unix { return try UnixSocketAddress(path: unixPath).connect() }
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw TestFailure("cannot connect to port \(port): errno \(errno)") }
            var on: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            return descriptor
        }
    }

    /// Page deliveries per second, and the daemon's CPU time per delivery (µs).
    struct Delivery {
        var rate: Double
        var cpu: Double
    }

    struct FanOut {
        /// The socket's, and as events over HTTP on a Unix socket (the same transport) and on
        /// TCP (whose loopback costs the daemon's core both ends' network stack). Each the
        /// median of its rounds, which alternate, so a busy moment of the machine falls on all.
        let socket: Delivery
        let events: Delivery
        let eventsOverTCP: Delivery
        let pageBytes: Int
    }

    /// `subscribers` followers over the socket, then as many event streams over HTTP, each
    /// receiving `pages` cached pages of about 22 KB (73 users each), from the first request
    /// sent to the last follower's last page; `rounds` times each, in turn.
    static func fanOut(subscribers: Int, pages: Int, rounds: Int) throws -> FanOut {
        let world = try World(upstreamLatency: .zero, feedOptions: "results = 73\nprefetch = 0\ncache_pages = 4096")
        let warm = try world.daemon.connect()
        try warm.send("next users \(pages)")
        let first = try warm.read(until: "page").found
        let pageBytes = first.jsonText.utf8.count
        for _ in 2...pages { _ = try warm.connection.readLine() }
        let deliveries = Double(subscribers * pages)
        func measured(_ body: () throws -> Duration) throws -> Delivery {
            let cpuBefore = try world.daemon.cpuSeconds()
            let elapsed = try body()
            return Delivery(rate: deliveries / elapsed.seconds, cpu: (try world.daemon.cpuSeconds() - cpuBefore) * 1e6 / deliveries)
        }
        var socket: [Delivery] = [], events: [Delivery] = [], eventsOverTCP: [Delivery] = []
        for _ in 0..<rounds {
            socket.append(try measured {
                let followers = try Followers(subscribers, on: [world.daemon.socketPath])
                let started = try followers.send(#"{"op":"subscribe","feed":"users","follow":true}"#)
                guard followers.counter.read(untilEachHas: 2 + pages, deadline: .now + .seconds(120)) else { throw TestFailure("socket fan-out timed out") }
                return followers.counter.lineCompletions[2 + pages]!.last - started
            })
            events.append(try measured { try eventsFanOut(subscribers: subscribers, pages: pages) { try world.connect(unix: true) } })
            eventsOverTCP.append(try measured { try eventsFanOut(subscribers: subscribers, pages: pages) { try world.connect(unix: false) } })
        }
        func median(_ rounds: [Delivery]) -> Delivery {
            Delivery(rate: quantile(rounds.map(\.rate), 0.5), cpu: quantile(rounds.map(\.cpu), 0.5))
        }
        return FanOut(socket: median(socket), events: median(events), eventsOverTCP: median(eventsOverTCP), pageBytes: pageBytes)
    }

    /// The time `subscribers` event streams, each on a connection `connect` makes, take to
    /// bring `pages` pages each.
    private static func eventsFanOut(subscribers: Int, pages: Int, connect: () throws -> Int32) throws -> Duration {
        // Every stream gets the same bytes: one stream read alone says how many.
        let request = Array("GET /v1/feeds/users/events HTTP/1.0\r\n\r\n".utf8)
        let probe = try connect()
        defer { close(probe) }
        let streamBytes = try bytesOfStream(probe, request: request, pages: pages)
        let streams = try (0..<subscribers).map { _ in try connect() }
        defer { for descriptor in streams { close(descriptor) } }
        let counter = LineCounter(streams)
        let started = ContinuousClock.now
        for descriptor in streams { _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) } }
        guard counter.read(bytes: streamBytes, deadline: .now + .seconds(120)) else { throw TestFailure("event stream fan-out timed out") }
        return ContinuousClock.now - started
    }

    /// The bytes of an event stream up to the end of its `pages`-th page event.
    private static func bytesOfStream(_ descriptor: Int32, request: [UInt8], pages: Int) throws -> Int {
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        var received: [UInt8] = []
        let last = Array("id: 1:\(pages)\n".utf8)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            received += buffer[0..<count]
            // The page's data line and the blank line after it end its event.
            if let start = offset(after: last, in: received), let end = offset(after: Array("\n\n".utf8), in: received, from: start) {
                return end
            }
        }
        throw TestFailure("one event stream did not bring \(pages) pages")
    }

    /// Latencies of the next page of a reader that pauses `pause` between pages on a feed
    /// prefetched 3 pages ahead (each page `upstreamLatency` upstream): `GET …/pages` on one
    /// kept-alive TCP connection, the same over the HTTP front's Unix socket (what the TCP
    /// loopback costs), and the socket's `next` in the same daemon. `rounds` rounds of `samples`
    /// requests of each, in turn, so that a busy moment of the machine falls on all three; each
    /// block continues where the one before stopped, so every page asked for is prefetched.
    static func pageLatency(rounds: Int, samples: Int, pause: Duration, upstreamLatency: Duration) throws -> PageLatency {
        let world = try World(upstreamLatency: upstreamLatency, feedOptions: "results = 20\nprefetch = 3\ncache_pages = 4096")
        let overTCP = try world.connect()
        defer { close(overTCP) }
        let overUnix = try world.connect(unix: true)
        defer { close(overUnix) }
        var tcpReader = KeepAliveReader(descriptor: overTCP)
        var unixReader = KeepAliveReader(descriptor: overUnix)
        var socket: [[Double]] = [], http: [[Double]] = [], httpOverUnix: [[Double]] = []
        var socketCPU = 0.0, httpCPU = 0.0
        var position = 0
        // The CPU seconds of the daemon's main thread, where both fronts and the engine run,
        // spent on `block`: a page's prefetch costs the same whichever client reads it, so the
        // difference between two kinds of request is their fronts'.
        func measuring(_ cpu: inout Double, _ block: () throws -> [Double]) throws -> [Double] {
            let before = try world.daemon.cpuSeconds(mainThreadOnly: true)
            let latencies = try block()
            cpu += try world.daemon.cpuSeconds(mainThreadOnly: true) - before
            return latencies
        }
        for _ in 0..<rounds {
            socket.append(try measuring(&socketCPU) { try timedNexts(world, after: position, samples: samples, pause: pause) })
            position += samples + 1
            http.append(try measuring(&httpCPU) { try timedGets(&tcpReader, after: position, samples: samples, pause: pause) })
            position += samples + 1
            httpOverUnix.append(try timedGets(&unixReader, after: position, samples: samples, pause: pause))
            position += samples + 1
        }
        let requests = Double(rounds * (samples + 1))
        return PageLatency(
            http: Quantiles(http.flatMap { $0 }), httpRoundP99s: http.map { quantile($0, 0.99) },
            httpOverUnix: Quantiles(httpOverUnix.flatMap { $0 }),
            socket: Quantiles(socket.flatMap { $0 }), socketRoundP99s: socket.map { quantile($0, 0.99) },
            cpuPerGet: httpCPU * 1e6 / requests, cpuPerNext: socketCPU * 1e6 / requests)
    }

    struct PageLatency {
        let http: Quantiles
        /// The p99 of each round's GETs alone: 200 samples, the issue's measure, whose spread
        /// says how much two slow requests move it.
        let httpRoundP99s: [Double]
        let httpOverUnix: Quantiles
        let socket: Quantiles
        let socketRoundP99s: [Double]
        /// The CPU time (µs) of the daemon's main thread per GET over TCP and per socket
        /// `next`, each with its share of its page's prefetch.
        let cpuPerGet: Double
        let cpuPerNext: Double
    }

    /// The latencies (ms) of `samples` `next`s on a new socket connection subscribed after page
    /// `after`, the first page taken untimed.
    private static func timedNexts(_ world: World, after: Int, samples: Int, pause: Duration) throws -> [Double] {
        let client = try world.daemon.connect()
        try client.send(#"{"op":"subscribe","feed":"users","after":\#(after)}"#)
        try client.expect("subscribed")
        try client.send("next users")
        _ = try client.read(until: "page")
        return try Scenarios.timedNexts(client, samples: samples, pause: pause)
    }

    /// p50 and p99 of some latencies (ms).
    struct Quantiles {
        let p50: Double
        let p99: Double

        init(_ latencies: [Double]) {
            p50 = quantile(latencies, 0.5)
            p99 = quantile(latencies, 0.99)
        }
    }

    /// The latencies (ms) of `samples` requests for the page after `after + 1` and the
    /// following ones, the page after `after` asked for first, untimed.
    private static func timedGets(_ reader: inout KeepAliveReader, after: Int, samples: Int, pause: Duration) throws -> [Double] {
        _ = try reader.get("/v1/feeds/users/pages?after=\(after)")
        var latencies: [Double] = []
        for page in (after + 1)...(after + samples) {
            Thread.sleep(forTimeInterval: pause.seconds)
            let started = ContinuousClock.now
            let body = try reader.get("/v1/feeds/users/pages?after=\(page)")
            latencies.append((ContinuousClock.now - started).milliseconds)
            guard body.starts(with: Array(#"{"feed":"users""#.utf8)) else { throw TestFailure("not a pages answer") }
        }
        return latencies
    }
}

/// Requests on one keep-alive HTTP/1.1 connection; reads each answer by its Content-Length.
private struct KeepAliveReader {
    let descriptor: Int32
    private var pending: [UInt8] = []
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// The body of `GET path`.
    mutating func get(_ path: String) throws -> [UInt8] {
        let request = Array("GET \(path) HTTP/1.1\r\nHost: bench\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        // The answer's header, read once: where the body starts and how long it is.
        var body: (start: Int, length: Int)?
        while true {
            if body == nil, let headerEnd = offset(after: Array("\r\n\r\n".utf8), in: pending) {
                let head = String(decoding: pending[..<headerEnd], as: UTF8.self).lowercased()
                guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                    let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                else { throw TestFailure("no Content-Length in \(head)") }
                body = (headerEnd, length)
            }
            if let (start, length) = body, pending.count >= start + length {
                let bytes = Array(pending[start..<(start + length)])
                pending.removeFirst(start + length)
                return bytes
            }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw TestFailure("the connection closed") }
            pending += buffer[0..<count]
        }
    }
}

/// Where the first `needle` in `bytes` at or after `start` ends. A plain loop: the generic
/// `firstRange(of:)`, unspecialised from another module, takes 0.1 ms to find a page answer's
/// header end 190 bytes in, which would be timed as the daemon's.
private func offset(after needle: [UInt8], in bytes: [UInt8], from start: Int = 0) -> Int? {
    var index = start
    while index + needle.count <= bytes.count {
        var matched = 0
        while matched < needle.count, bytes[index + matched] == needle[matched] { matched += 1 }
        if matched == needle.count { return index + needle.count }
        index += 1
    }
    return nil
}
