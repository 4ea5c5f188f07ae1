import FeedKit
import Foundation
import Glibc
import TestSupport

// feedd-bench: starts the real daemon (the release build beside this binary) against a loopback
// upstream and prints each figure's median and spread over several runs.
//   swift run -c release feedd-bench [RUNS] [latency] [fanout] [idle] [upstream] [sharing] [engine] [acks] [http] [fleet] [feeds]

// The package builds feedd with the benchmark (it is a dependency). A benchmark binary without
// one beside it would otherwise measure whatever feedd lay elsewhere (a debug build, an old
// one) without a word. To measure another build on purpose, name its directory in
// FEEDD_BINARY_DIR.
let ownDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
if ProcessInfo.processInfo.environment["FEEDD_BINARY_DIR"] == nil, !FileManager.default.isExecutableFile(atPath: "\(ownDirectory)/feedd") {
    FileHandle.standardError.write(Data("feedd-bench: no feedd beside \(ownDirectory); run `swift build -c release` first\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments.dropFirst()
let runs = arguments.first.flatMap(Int.init) ?? 3
let chosen = Set(arguments.filter { Int($0) == nil })
func wanted(_ scenario: String) -> Bool { chosen.isEmpty || chosen.contains(scenario) }
let subscribers = Int(ProcessInfo.processInfo.environment["FEEDD_BENCH_SUBSCRIBERS"] ?? "") ?? 1_000
/// `count` as the tables write it, digits grouped by threes (1,000), so a row says how many
/// subscribers it measured however `FEEDD_BENCH_SUBSCRIBERS` set them.
func grouped(_ count: Int) -> String {
    let digits = Array(String(count))
    return String(digits.enumerated().flatMap { index, digit in index > 0 && (digits.count - index) % 3 == 0 ? [",", digit] : [digit] })
}
var limit = rlimit()
getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
limit.rlim_cur = limit.rlim_max
setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

var figures: [String: Figure] = [:]
var order: [String] = []
@MainActor
func record(_ name: String, _ unit: String, _ value: Double) {
    if figures[name] == nil {
        figures[name] = Figure(name: name, unit: unit)
        order.append(name)
    }
    figures[name]!.values.append(value)
}

var redisSkipped: String?
for run in 1...runs {
    FileHandle.standardError.write(Data("run \(run) of \(runs)…\n".utf8))
    if wanted("latency") {
        let prefetched = try Scenarios.nextLatency(prefetch: 3, samples: 300, pause: .milliseconds(125))
        record("next-page latency p50, prefetch 3, upstream 100 ms", "ms", prefetched.p50)
        record("next-page latency p99, prefetch 3, upstream 100 ms", "ms", prefetched.p99)
        record("daemon CPU per page (fetch, parse, encode, reply)", "ms", prefetched.cpuPerPage)
        let floor = try Scenarios.echoLatency(page: prefetched.firstPage, samples: 300, pause: .milliseconds(125))
        record("the same page line from a C echo server (page-echo.c), p50", "ms", floor.p50)
        record("the same page line from a C echo server (page-echo.c), p99", "ms", floor.p99)
        record("prefetched next p99 / echo server p99", "×", prefetched.p99 / floor.p99)
        let unprefetched = try Scenarios.nextLatency(prefetch: 0, samples: 30, pause: .milliseconds(10))
        record("next-page latency p50, prefetch 0, upstream 100 ms", "ms", unprefetched.p50)
        record("next-page latency p99, prefetch 0, upstream 100 ms", "ms", unprefetched.p99)
        record("prefetch speed-up (p50 ratio)", "×", unprefetched.p50 / prefetched.p50)
    }
    if wanted("fanout") {
        let fanOut = try Scenarios.fanOut(subscribers: subscribers, pages: 40, latencyPages: 20)
        record("fan-out to \(grouped(subscribers)) followers: delivered", "MB/s", fanOut.bytesPerSecond / 1e6)
        record("fan-out to \(grouped(subscribers)) followers: page deliveries", "pages/s", fanOut.pageDeliveriesPerSecond)
        record("fan-out: upstream answer to last follower (p50)", "ms", fanOut.publishToLastReceipt)
        record("fan-out: page line size", "bytes", Double(fanOut.samplePage.count))
        record("fan-out: another client's ping p99 meanwhile", "ms", fanOut.pingP99)
        record("fan-out: pings answered meanwhile (one a millisecond at most)", "count", Double(fanOut.pings))
        switch try RedisReference.fanOut(subscribers: subscribers, messages: 40, payload: fanOut.samplePage) {
        case .success(let redis):
            record("Redis pub/sub, same page, \(grouped(subscribers)) subscribers", "MB/s", redis.bytesPerSecond / 1e6)
            record("feedd / Redis delivered bytes ratio", "×", fanOut.bytesPerSecond / redis.bytesPerSecond)
            record("Redis pub/sub: another client's PING p99 meanwhile", "ms", redis.pingP99)
            record("Redis pub/sub: PINGs answered meanwhile", "count", Double(redis.pings))
            record("fan-out ping p99: feedd / Redis", "×", fanOut.pingP99 / redis.pingP99)
        case .failure(let reason):
            redisSkipped = reason.description
        }
        let raw = try RawFanOut.bytesPerSecond(subscribers: subscribers, messages: 40, payload: fanOut.samplePage)
        record("raw C fan-out, same page, \(grouped(subscribers)) sockets (fanout-writer.c)", "MB/s", raw / 1e6)
        record("feedd / raw C fan-out delivered bytes ratio", "×", fanOut.bytesPerSecond / raw)
    }
    if wanted("idle") {
        let idle = try Scenarios.idleConnections(10_000)
        record("10,000 idle connections: RssAnon per connection", "KiB", idle.perConnection)
        record("idle daemon RssAnon", "MiB", idle.idleAnon)
        record("idle daemon RSS", "MiB", idle.idleRSS)
    }
    if wanted("upstream") { try UpstreamPathScenarios.run() }
    if wanted("engine") {
        let large = try EngineScenarios.largeFile()
        record("1M-line file (\(large.fileBytes / 1_000_000) MB): first page after `after: 49000`", "ms", large.farPage)
        record("1M-line file: items/s a reader drains from page 1 (page_size 20, next with a count)", "items/s", large.readerItemsPerSecond)
        record("drain: another client's ping p99 meanwhile", "ms", large.pingP99)
        record("the same file framed by C (read + memchr, line-framer.c)", "lines/s", large.framedLinesPerSecond)
        record("reader drain / C line framer", "×", large.readerItemsPerSecond / large.framedLinesPerSecond)
        record("1M-line file: items/s a follower drains from page 1 (page_size 20, prefetch 2)", "items/s", large.followerItemsPerSecond)
        let largePages = try EngineScenarios.largeFile(pageSize: 1_000)
        record("1M-line file: items/s a reader drains from page 1 (page_size 1000, next with a count)", "items/s", largePages.readerItemsPerSecond)
        record("1,000 small file feeds read through: RssAnon per feed beyond cached pages", "KiB", try EngineScenarios.manySmallFeeds())
        let pages = try EngineScenarios.largePages()
        record("8 pages of 200,000 items, cache_bytes 32MiB: VmRSS growth", "MiB", pages.rssGrowth)
        record("one such page: JSON line", "MiB", pages.pageJSON)
        record("one such page: cached (cache_bytes' count)", "MiB", pages.cachedPerPage)
    }
    if wanted("acks") {
        // The machine's own pauses, which bound how short a p99 under load can be here.
        let noise = MachineNoise.measure()
        record("machine alone: a busy thread per core paused over 1 ms", "/s/core", noise.overOneMillisecondPerSecond)
        record("machine alone: longest pause of a busy thread", "ms", noise.longest)
        let storm = try StateScenarios.ackStorm()
        record("1,000 consumers acking: acks made durable", "acks/s", storm.acksPerSecond)
        record("meanwhile, prefetched next p50", "ms", storm.nextP50)
        record("meanwhile, prefetched next p99", "ms", storm.nextP99)
        record("meanwhile, prefetched next, slowest", "ms", storm.nextMax)
        record("meanwhile, prefetched nexts timed", "count", Double(storm.samples))
        record("daemon CPU per ack (with its next), all threads", "µs", storm.cpuPerAck)
        record("daemon CPU per ack (with its next), main thread", "µs", storm.mainThreadCPUPerAck)
        record("ack storm: another client's ping p99 meanwhile", "ms", storm.pingP99)
        if let skipped = try AckStormReference.run(record: record) { redisSkipped = skipped }
    }
    if wanted("sharing") {
        let sharing = try Scenarios.upstreamSharing(clients: 100, pages: 20)
        record("100 clients, 20 pages: upstream requests per distinct page", "", sharing.perDistinctPage)
        record("100 clients, 20 pages: upstream requests per page delivered", "", sharing.perDelivery)
    }
    if wanted("http") { try HTTPScenarios.run(subscribers: subscribers) }
    if wanted("feeds") { try FeedScenarios.run(record: record) }
    if wanted("fleet") {
        let fleet = try await FleetScenarios.fleet()
        record("fleet of 3, 300 clients each: upstream requests per page", "", fleet.requestsPerPage)
        record("fleet: prefetched next p50, instance that did not fetch the page", "ms", fleet.next.p50)
        record("fleet: prefetched next p99, instance that did not fetch the page", "ms", fleet.next.p99)
        record("standalone, same load: prefetched next p99", "ms", fleet.standaloneNext.p99)
        record("with the followers: prefetched next p99, instance that did not fetch", "ms", fleet.loadedNext.p99)
        record("with the followers: standalone prefetched next p99", "ms", fleet.loadedStandaloneNext.p99)
        record("fleet: upstream answer to a follower on another instance p50", "ms", fleet.follower.p50)
        record("fleet: upstream answer to a follower on another instance p99", "ms", fleet.follower.p99)
        record("standalone, same load: upstream answer to a follower p50", "ms", fleet.standaloneFollower.p50)
        record("standalone, same load: upstream answer to a follower p99", "ms", fleet.standaloneFollower.p99)
        record("fleet: pages published while its followers read", "pages/s", fleet.livePagesPerSecond)
        record("fleet: fan-out per instance, 300 followers, cached pages", "MB/s", fleet.fanOutPerInstance / 1e6)
        record("standalone: fan-out, 300 followers, cached pages", "MB/s", fleet.fanOutStandalone / 1e6)
        record("fleet / standalone fan-out per instance", "×", fleet.fanOutPerInstance / fleet.fanOutStandalone)
    }
}

let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
    .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
print("feedd-bench: \(runs) runs, \(ProcessInfo.processInfo.activeProcessorCount) cores, \(cpu)")
print("")
let width = order.map(\.count).max() ?? 40
print("| " + "figure".padding(toLength: width, withPad: " ", startingAt: 0) + " | unit    | median   | spread (min–max) |")
print("| " + String(repeating: "-", count: width) + " | ------- | -------- | ---------------- |")
for name in order {
    let figure = figures[name]!
    print("| \(name.padding(toLength: width, withPad: " ", startingAt: 0)) | \(figure.unit.padding(toLength: 7, withPad: " ", startingAt: 0)) | \(format(figure.median).padding(toLength: 8, withPad: " ", startingAt: 0)) | \(figure.spread.padding(toLength: 16, withPad: " ", startingAt: 0)) |")
}
if let redisSkipped { print("\nRedis reference skipped: \(redisSkipped)") }
