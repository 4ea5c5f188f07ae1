import FeedClient
import FeedKit
import Foundation
import Glibc
import TestSupport

/// The path from an upstream body to a page line, against a C program doing the same with the
/// same libraries; and the memory that very wide JSON pages cost an `s3` feed.
enum UpstreamPathScenarios {
    /// Runs every figure of the scenario and records it.
    /// Pages per round; FEEDD_BENCH_UPSTREAM_PAGES sets more, to profile a round.
    static let pagesPerRound = Int(ProcessInfo.processInfo.environment["FEEDD_BENCH_UPSTREAM_PAGES"] ?? "") ?? 2_000

    @MainActor
    static func run(rounds: Int = 3) throws {
        let upstream = try KeepAliveUpstream { target in
            if target.hasPrefix("/api/") { return RandomUserPages.body(page: Int(query(target, "page") ?? "") ?? 1) }
            return nil
        }
        let reference = try CReference.build("randomuser-fetch.cpp", libraries: ["curl", "simdjson"])
        for _ in 0..<rounds {
            let feedd = try feeddRandomUserPages(upstream: upstream, pages: pagesPerRound)
            let c = try reference.fetch(upstream: upstream, pages: pagesPerRound)
            record("randomuser page (\(RandomUserPages.body(page: 1).count / 1000) KB): daemon CPU, fetch + parse + encode", "ms", feedd.cpuPerPage)
            record("the same page: C reference (libcurl reusing its connection, simdjson)", "ms", c.cpuPerPage)
            record("feedd / C reference, CPU per page", "×", feedd.cpuPerPage / c.cpuPerPage)
            record("meanwhile, another client's ping p99", "ms", feedd.pingP99)
        }
        let wide = try widePages(source: "s3")
        record("s3: 8 pages of 200,000 items, cache_bytes 32MiB: VmRSS growth", "MiB", wide.growth)
        record("s3: the same, once the reader has left", "MiB", wide.afterLeaving)
        record("s3: largest VmRSS rise decoding one such page", "MiB", wide.peakPerPage)
    }

    struct PageCost {
        /// Daemon CPU time (user and system, all threads) per page, in ms.
        let cpuPerPage: Double
        /// Another connection's `ping` round trip meanwhile, p99 in ms.
        let pingP99: Double
    }

    /// A fresh daemon's CPU per page for a reader asking for `pages` pages of 20 users at once,
    /// after a first page that opens the upstream connection.
    static func feeddRandomUserPages(upstream: KeepAliveUpstream, pages: Int) throws -> PageCost {
        let daemon = try daemon(feed: "users", """
            source = "randomuser"
            url = "\(upstream.baseURL)/api/"
            results = 20
            seed = "bench"
            """)
        let reader = try daemon.connect()
        try reader.send("next users")
        _ = try reader.read(until: "page")
        let pinger = try PingTimer(daemon)
        let before = try daemon.cpuSeconds()
        try reader.send(#"{"op":"next","feed":"users","count":\#(pages)}"#)
        for _ in 0..<pages {
            let line = try reader.connection.readLine(timeout: .seconds(60))
            guard let line, line.starts(with: Array(#"{"type":"page""#.utf8)) else {
                throw TestFailure("expected a page line, got \(line.map { String(decoding: $0.prefix(300), as: UTF8.self) } ?? "nothing")")
            }
        }
        let cpu = try daemon.cpuSeconds() - before
        return PageCost(cpuPerPage: cpu * 1000 / Double(pages), pingP99: quantile(pinger.stop(), 0.99))
    }

    struct WidePages {
        let growth: Double
        let afterLeaving: Double
        let peakPerPage: Double
    }

    /// 8 pages of 200,000 tiny items each (`{"id":"1234567"}`, 3.4 MB of JSON a page) read by one
    /// client from a `source` feed with `cache_bytes = "32MiB"`: VmRSS growth over the idle daemon
    /// after the last page, after the client has left, and the largest rise while one page was
    /// being fetched and decoded (sampled every 2 ms).
    static func widePages(source: String, pages: Int = 8, itemsPerPage: Int = 200_000) throws -> WidePages {
        let bodies = (1...pages).map { page in WidePage.body(page: page, items: itemsPerPage, last: page == pages) }
        let upstream = try KeepAliveUpstream { target in
            guard target.hasPrefix("/feed-"), let page = Int(target.dropFirst(6).prefix { $0.isNumber }), bodies.indices.contains(page - 1) else { return nil }
            return bodies[page - 1]
        }
        let options = source == "http" ? "items = \"items\"\nid = \"id\"" : ""
        let daemon = try daemon(feed: "wide", """
            source = "\(source)"
            url = "\(upstream.baseURL)/feed-{page}.json"
            cache_bytes = "32MiB"
            \(options)
            """)
        let reader = try daemon.connect()
        _ = try reader.request("ping")
        let before = try daemon.memory("VmRSS")
        let sampler = PeakMemory(pid: daemon.pid)
        var peak = 0
        for page in 1...pages {
            let start = try daemon.memory("VmRSS")
            sampler.reset()
            try reader.send("next wide")
            _ = try reader.read(until: "page", timeout: .seconds(60))
            if page > 1 { peak = max(peak, sampler.highest - start) }
        }
        sampler.stop()
        let after = try daemon.memory("VmRSS")
        reader.connection.finishSending()
        let watcher = try daemon.connect()
        _ = try watcher.clientsOnceOthersLeave()
        let left = try daemon.memory("VmRSS")
        return WidePages(growth: Double(after - before) / 1024, afterLeaving: Double(left - before) / 1024, peakPerPage: Double(peak) / 1024)
    }

    /// A daemon with one feed, `name`, of `options`, that fetches only what is asked for.
    static func daemon(feed name: String, _ options: String) throws -> DaemonProcess {
        try DaemonProcess(config: "[daemon]\nlog_level = \"notice\"\n\n[feeds.\(name)]\nprefetch = 0\n\(options)\n")
    }

    static func query(_ target: String, _ name: String) -> String? {
        URLComponents(string: target)?.queryItems?.first { $0.name == name }?.value
    }
}

/// A C reference of Benchmarks/CReferences (randomuser-fetch.cpp, line-framer.c), built with the
/// system compiler.
struct CReference {
    let executable: String

    static func build(_ file: String, libraries: [String] = []) throws -> CReference {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../CReferences/\(file)").standardized.path
        let directory = NSTemporaryDirectory() + "feedd-bench-reference-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let executable = directory + "/" + URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent
        let (compiler, standard) = file.hasSuffix(".c") ? ("/usr/bin/cc", "-std=c11") : ("/usr/bin/c++", "-std=c++17")
        let (status, _, errors) = try ChildProcess.run(compiler, ["-O2", standard, source] + libraries.map { "-l\($0)" } + ["-o", executable])
        guard status == 0 else { throw TestFailure("building the C reference \(file) failed: \(errors)") }
        return CReference(executable: executable)
    }

    /// Lines per second line-framer.c frames out of the file at `path`.
    func frameLines(of path: String) throws -> Double {
        let (status, output, errors) = try ChildProcess.run(executable, [path])
        let fields = output.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        guard status == 0, fields.count == 2, fields[1] > 0 else { throw TestFailure("the line framer failed: \(errors)") }
        return fields[0] / fields[1]
    }

    /// CPU per page (ms) for `pages` pages after a warming one.
    func fetch(upstream: KeepAliveUpstream, pages: Int) throws -> (cpuPerPage: Double, wall: Double) {
        let (status, output, errors) = try ChildProcess.run(executable, ["\(upstream.baseURL)/api/", String(pages)])
        let fields = output.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        guard status == 0, fields.count == 3 else { throw TestFailure("the C reference failed: \(errors)") }
        return (fields[1] * 1000 / fields[0], fields[2])
    }
}

/// The highest VmRSS of a process since the last ``reset()``, read every 2 ms by a thread.
final class PeakMemory: @unchecked Sendable {
    // Sendable: the mutable fields are only touched under `lock`.
    private let lock = NSLock()
    private var peak = 0
    private var running = true

    init(pid: Int32) {
        Thread.detachNewThread { [self] in
            while lock.withLock({ running }) {
                if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                    let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
                    let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
                {
                    lock.withLock { peak = max(peak, kilobytes) }
                }
                usleep(2_000)
            }
        }
    }

    /// In kB.
    var highest: Int { lock.withLock { peak } }
    func reset() { lock.withLock { peak = 0 } }
    func stop() { lock.withLock { running = false } }
}

/// Times `ping` on a connection of its own, every millisecond, until stopped.
final class PingTimer: @unchecked Sendable {
    // Sendable: `samples` and `running` are only touched under `lock`; the thread owns the connection.
    private let lock = NSLock()
    private var samples: [Double] = []
    private var running = true
    private let finished = DispatchSemaphore(value: 0)

    /// Times feedd's `ping`.
    convenience init(_ daemon: DaemonProcess) throws {
        try self.init(timing: daemon.connect()) { _ = try $0.request("ping") }
    }

    /// Times Redis's `PING` on a connection to its socket at `path`.
    convenience init(redisAt path: String) throws {
        let ping = Array("PING\r\n".utf8)
        try self.init(timing: FeedConnection(path: path)) { connection in
            try connection.sendRaw(ping)
            guard try connection.readLine() != nil else { throw TestFailure("Redis closed the PING connection") }
        }
    }

    /// Times `roundTrip` on `client`, once a millisecond.
    private init<Client>(timing client: Client, _ roundTrip: @escaping (Client) throws -> Void) {
        // The thread is the connection's only user from here on.
        nonisolated(unsafe) let client = client
        nonisolated(unsafe) let roundTrip = roundTrip
        Thread.detachNewThread { [self] in
            defer { finished.signal() }
            while lock.withLock({ running }) {
                let started = ContinuousClock.now
                guard (try? roundTrip(client)) != nil else { return }
                let elapsed = (ContinuousClock.now - started).milliseconds
                lock.withLock { samples.append(elapsed) }
                usleep(1_000)
            }
        }
    }

    /// Stops timing; returns every round trip (ms).
    func stop() -> [Double] {
        lock.withLock { running = false }
        finished.wait()
        return lock.withLock { samples }
    }
}

/// randomuser.me-shaped pages of 20 users, about 22 KB, with the fields the real API sends.
enum RandomUserPages {
    static func body(page: Int) -> [UInt8] {
        var text = #"{"results":["#
        for index in 0..<20 {
            if index > 0 { text += "," }
            let uuid = String(format: "%08x-%04x-4d68-901f-c0d4c1c3%04x", page, index, page &* 31 &+ index)
            text += #"{"gender":"\#(index % 2 == 0 ? "female" : "male")","name":{"title":"Miss","first":"Zoë","last":"Nichols-\#(index)"},"#
            text += #""location":{"street":{"number":\#(8929 + index),"name":"Valwood Pkwy"},"city":"Zürich","state":"Michigan","country":"United States","#
            text += #""postcode":"63104","coordinates":{"latitude":"-69.8246","longitude":"134.8719"},"timezone":{"offset":"+9:30","description":"Adelaide, Darwin"}},"#
            text += #""email":"jennie.nichols\#(index)@example.com","login":{"uuid":"\#(uuid)","username":"yellowpeacock\#(index)","password":"addison","#
            text += #""salt":"sld1yGtd","md5":"ab54ac4c0be9480ae8fa5e9e2a5196a3","sha1":"edcf2ce613cbdea349133c52dc2f3b83168dc51b","#
            text += #""sha256":"48df5229235ada28389b91e60a935e4f9b73eb4bdb855ef9258a1751f10bdc5d"},"dob":{"date":"1992-03-08T15:13:16.688Z","age":30},"#
            text += #""registered":{"date":"2007-07-09T05:51:59.390Z","age":14},"phone":"(272) 790-0888","cell":"(489) 330-2385","#
            text += #""id":{"name":"SSN","value":"405-88-3636"},"picture":{"large":"https:\/\/randomuser.me\/api\/portraits\/women\/75.jpg","#
            text += #""medium":"https:\/\/randomuser.me\/api\/portraits\/med\/women\/75.jpg","thumbnail":"https:\/\/randomuser.me\/api\/portraits\/thumb\/women\/75.jpg"},"nat":"US"}"#
        }
        text += #"],"info":{"seed":"bench","results":20,"page":\#(page),"version":"1.4"}}"#
        return Array(text.utf8)
    }
}

/// An HTTP/1.1 server on 127.0.0.1 that keeps connections open, as an API behind a load balancer
/// does, so both sides of the comparison reuse theirs. `route` maps a request target to a body
/// (nil: 404).
final class KeepAliveUpstream: @unchecked Sendable {
    // Sendable: `route` is immutable; each connection is served by a thread of its own.
    let port: UInt16
    private let listener: Int32
    private let route: @Sendable (String) -> [UInt8]?

    init(route: @escaping @Sendable (String) -> [UInt8]?) throws {
        self.route = route
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else { throw TestFailure("cannot listen on 127.0.0.1") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        let listening = listener
        Thread.detachNewThread { [route] in
            while true {
                let client = accept(listening, nil, nil)
                guard client >= 0 else { return }
                Thread.detachNewThread { Self.serve(client, route: route) }
            }
        }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    private static func serve(_ client: Int32, route: (String) -> [UInt8]?) {
        defer { close(client) }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            guard let end = pending.firstRange(of: Array("\r\n\r\n".utf8)) else {
                let count = recv(client, &chunk, chunk.count, 0)
                guard count > 0 else { return }
                pending += chunk[0..<count]
                continue
            }
            let head = String(decoding: pending[..<end.lowerBound], as: UTF8.self)
            pending.removeSubrange(..<end.upperBound)
            let target = head.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
            let body = route(target)
            var response = Array("HTTP/1.1 \(body == nil ? "404 Not Found" : "200 OK")\r\nContent-Type: application/json\r\nContent-Length: \(body?.count ?? 0)\r\n\r\n".utf8)
            response += body ?? []
            var offset = 0
            while offset < response.count {
                let written = response[offset...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}
