import FeedClient
import FeedKit
import Foundation
import TestSupport

/// The engine's own costs on local files: reaching a far page, draining a large file, the
/// memory of many feeds and of very large pages.
enum EngineScenarios {
    /// A file of `lines` JSON lines of about 57 bytes each, like `{"n":17,"name":"user 17","tags":["a","b"]}`.
    static func writeLargeFile(_ directory: TemporaryDirectory, lines: Int) throws -> String {
        let path = directory.path("large.ndjson")
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        var chunk = ""
        for line in 1...lines {
            chunk += #"{"n":\#(line),"name":"user \#(line)","tags":["alpha","beta"],"ok":true}"# + "\n"
            if line % 10_000 == 0 {
                handle.write(Data(chunk.utf8))
                chunk = ""
            }
        }
        handle.write(Data(chunk.utf8))
        try handle.close()
        return path
    }

    struct LargeFile {
        /// From sending `subscribe … after 49000` and `next` to having page 49,001 (ms).
        let farPage: Double
        /// Items per second a reader receives asking for every page of the file at once (`next`
        /// with a count), from page 1.
        let readerItemsPerSecond: Double
        /// Items per second a follower receives from page 1; it is kept `prefetch` pages ahead.
        let followerItemsPerSecond: Double
        /// Another connection's `ping` round trip while the reader drains, p99 in ms.
        let pingP99: Double
        /// Lines per second line-framer.c frames out of the same file in the same run.
        let framedLinesPerSecond: Double
        let fileBytes: Int
    }

    /// The 1,000,000-line file: the first page after `after: 49000`, then a follower draining it.
    static func largeFile(lines: Int = 1_000_000, pageSize: Int = 20, drainSeconds: Double = 8) throws -> LargeFile {
        let directory = try TemporaryDirectory()
        let path = try writeLargeFile(directory, lines: lines)
        let fileBytes = Int((try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0)
        let daemon = try DaemonProcess(config: """
            [daemon]
            log_level = "notice"

            [feeds.large]
            source = "file"
            path = "\(path)"
            page_size = \(pageSize)
            """, directory: directory)
        let pagesInFile = (lines + pageSize - 1) / pageSize
        // Page 49,001 of 20-line pages; halfway through the file for larger pages.
        let after = min(49_000, pagesInFile / 2)
        let reader = try daemon.connect()
        let started = ContinuousClock.now
        try reader.send(#"{"op":"subscribe","feed":"large","after":\#(after)}"#)
        try reader.send("next large")
        let page = try reader.read(until: "page", timeout: .seconds(60)).found
        let farPage = (ContinuousClock.now - started).milliseconds
        guard page["page"] == .integer(Int64(after + 1)), page["items"]?.arrayValue?.first?["id"] == .string(String(after * pageSize + 1)) else {
            throw TestFailure("page \(after + 1) is wrong: \(page.jsonText.prefix(200))")
        }

        // A reader asking for many pages at once, then a follower, each from page 1.
        let pinger = try PingTimer(daemon)
        let asking = try drain(daemon, pages: pagesInFile, seconds: drainSeconds) { connection in
            try connection.send(#"{"op":"subscribe","feed":"large"}"#)
            // `count` is at most 10,000 a request.
            for _ in stride(from: 0, to: pagesInFile, by: 10_000) { try connection.send(#"{"op":"next","feed":"large","count":10000}"#) }
        }
        let pingP99 = quantile(pinger.stop(), 0.99)
        let follower = try drain(daemon, pages: pagesInFile, seconds: drainSeconds) { connection in
            try connection.send(#"{"op":"subscribe","feed":"large","follow":true}"#)
        }
        let framed = try CReference.build("line-framer.c").frameLines(of: path)
        return LargeFile(
            farPage: farPage, readerItemsPerSecond: asking * Double(pageSize), followerItemsPerSecond: follower * Double(pageSize),
            pingP99: pingP99, framedLinesPerSecond: framed, fileBytes: fileBytes)
    }

    /// Pages per second a new connection receives after `start`, until it has `pages` pages or
    /// `seconds` passed.
    private static func drain(_ daemon: DaemonProcess, pages wanted: Int, seconds: Double, start: (FeedConnection) throws -> Void) throws -> Double {
        let connection = try FeedConnection(path: daemon.socketPath)
        _ = try connection.readLine()
        try start(connection)
        let started = ContinuousClock.now
        var pages = 0
        while pages < wanted, (ContinuousClock.now - started).seconds < seconds {
            guard let line = try connection.readLine() else { throw TestFailure("the daemon closed the connection") }
            if line.starts(with: Array(#"{"type":"page""#.utf8)) { pages += 1 }
        }
        return Double(pages) / (ContinuousClock.now - started).seconds
    }

    /// RssAnon per feed (KiB) of `count` small file feeds that a client has read through, beyond
    /// what their cached pages take (`cached_bytes` in `status`).
    static func manySmallFeeds(_ count: Int = 1_000) throws -> Double {
        let directory = try TemporaryDirectory()
        var config = "[daemon]\nlog_level = \"notice\"\nprefetch = 0\n"
        let body = (1...30).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n"
        for index in 0..<count {
            let path = try directory.write("small-\(index).ndjson", body)
            config += "\n[feeds.f\(index)]\nsource = \"file\"\npath = \"\(path)\"\npage_size = 10\n"
        }
        let daemon = try DaemonProcess(config: config, directory: directory)
        let reader = try daemon.connect()
        _ = try reader.request("ping")
        let before = try daemon.memory("RssAnon")
        for index in 0..<count {
            try reader.send("next f\(index) 4")
            _ = try reader.read(until: "end", timeout: .seconds(30))
            try reader.send("unsubscribe f\(index)")
            _ = try reader.read(until: "unsubscribed")
        }
        let status = try reader.request("status")
        let cachedBytes = status["feeds"]?.arrayValue?.compactMap { $0["cached_bytes"]?.integerValue }.reduce(0, +) ?? 0
        let after = try daemon.memory("RssAnon")
        return (Double(after - before) - Double(cachedBytes) / 1024) / Double(count)
    }

    struct LargePages {
        /// VmRSS growth (MiB) from before the first page to after the last.
        let rssGrowth: Double
        /// What one page of the file takes as JSON (MiB), and as the daemon caches it.
        let pageJSON: Double
        let cachedPerPage: Double
    }

    /// 8 pages of 200,000 tiny items each read by one client, `cache_bytes = "32MiB"`.
    static func largePages(pages: Int = 8, itemsPerPage: Int = 200_000) throws -> LargePages {
        let directory = try TemporaryDirectory()
        let path = directory.path("tiny.ndjson")
        var text = ""
        text.reserveCapacity(pages * itemsPerPage * 18)
        for line in 1...(pages * itemsPerPage) { text += #"{"v":\#(line % 1000)}"# + "\n" }
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        let daemon = try DaemonProcess(config: """
            [daemon]
            log_level = "notice"

            [feeds.tiny]
            source = "file"
            path = "\(path)"
            page_size = \(itemsPerPage)
            prefetch = 0
            cache_bytes = "32MiB"
            """, directory: directory)
        let reader = try daemon.connect()
        _ = try reader.request("ping")
        let before = try daemon.memory("VmRSS")
        var lineBytes = 0
        try reader.send("next tiny \(pages)")
        _ = try reader.expect("subscribed", timeout: .seconds(60))
        for _ in 0..<pages {
            guard let line = try reader.connection.readLine() else { throw TestFailure("closed") }
            lineBytes = line.count
        }
        let status = try reader.request("status")
        let feed = status["feeds"]?.arrayValue?.first
        let cachedBytes = Double(feed?["cached_bytes"]?.integerValue ?? 0)
        let cachedPages = Double(max(feed?["cached_pages"]?.integerValue ?? 1, 1))
        let after = try daemon.memory("VmRSS")
        return LargePages(
            rssGrowth: Double(after - before) / 1024, pageJSON: Double(lineBytes) / 1_048_576,
            cachedPerPage: cachedBytes / cachedPages / 1_048_576)
    }
}
