import FeedClient
import FeedKit
import Foundation
import Glibc
import TestSupport

/// The `rss` adapter on large documents: a whole RSS 2.0 document served over loopback HTTP and
/// read through, from the request to the last page delivered, against fastfeedparser (and
/// feedparser) parsing the same bytes in the same run.
enum FeedScenarios {
    struct Measured {
        let documentBytes: Int
        /// Entries per second a reader receives, from its request to its last page.
        var itemsPerSecond: Double
        /// The daemon's peak resident memory over what it had before the request, as a multiple
        /// of the document's size.
        var peakGrowth: Double
        /// The CPU time the daemon spent from the request to the last page (the download, the
        /// parse on the body's own thread, which has exited by then, the entries' batches, the
        /// state writer's commits, the answers), in seconds.
        var cpuSeconds: Double
        let fastFeedparserItemsPerSecond: Double?
        let feedparserItemsPerSecond: Double?
    }

    /// Every figure of the scenario, recorded with `record`; the references are skipped, saying
    /// so, when PyPI is out of reach.
    ///
    /// Where feedd is compared with fastfeedparser, both figures are the best of three: the
    /// reference's three parses in one process, feedd's three reads by three fresh daemons (a
    /// daemon reads a document once; a second read is served from its cache). One read against
    /// the reference's best of three gave this shared machine's noise to one side only.
    static func run(record: (String, String, Double) -> Void) throws {
        for (items, pageSize) in [(20_000, 20), (20_000, 1_000), (50_000, 1_000)] {
            let compared = pageSize == 1_000
            var measured = try readThrough(items: items, pageSize: pageSize, references: compared)
            var cpuSeconds = [measured.cpuSeconds]
            for _ in 1..<(compared ? bestOf : 1) {
                let again = try readThrough(items: items, pageSize: pageSize, references: false)
                measured.itemsPerSecond = max(measured.itemsPerSecond, again.itemsPerSecond)
                // Memory is not a best case: the largest growth of the three reads.
                measured.peakGrowth = max(measured.peakGrowth, again.peakGrowth)
                cpuSeconds.append(again.cpuSeconds)
            }
            let name = "\(items / 1_000)k-item RSS (\(measured.documentBytes / 1_000_000) MB), page_size \(pageSize)"
            let reads = compared ? " (best of \(bestOf) reads)" : ""
            record("\(name): items/s delivered\(reads)", "items/s", measured.itemsPerSecond)
            record("\(name): peak memory growth / document size\(compared ? " (largest of \(bestOf))" : "")", "×", measured.peakGrowth)
            record("\(name): daemon CPU for the read\(compared ? " (median of \(bestOf))" : "")", "ms", cpuSeconds.sorted()[cpuSeconds.count / 2] * 1_000)
            if compared {
                guard let fast = measured.fastFeedparserItemsPerSecond, let slow = measured.feedparserItemsPerSecond else {
                    FileHandle.standardError.write(Data("feeds: fastfeedparser and feedparser could not be installed from PyPI; no reference\n".utf8))
                    continue
                }
                record("\(items / 1_000)k-item RSS: fastfeedparser parsing the same bytes (best of \(bestOf))", "items/s", fast)
                record("\(items / 1_000)k-item RSS: feedparser parsing the same bytes", "items/s", slow)
                record("\(items / 1_000)k-item RSS: feedd / fastfeedparser", "×", measured.itemsPerSecond / fast)
            }
        }
    }

    /// How many reads (and reference parses) a compared figure is the best of.
    static let bestOf = 3

    static func readThrough(items: Int, pageSize: Int, references: Bool) throws -> Measured {
        let directory = try TemporaryDirectory()
        let document = Self.document(items: items)
        let upstream = try LoopbackUpstream()
        upstream.setResource("/feed.xml", LoopbackUpstream.Resource(body: document, contentType: "application/rss+xml"))
        let daemon = try DaemonProcess(config: """
            [daemon]
            log_level = "notice"

            [feeds.news]
            source = "rss"
            url = "\(upstream.baseURL)/feed.xml"
            page_size = \(pageSize)
            prefetch = 0
            """, directory: directory)
        let connection = try FeedConnection(path: daemon.socketPath)
        _ = try connection.readLine()
        let residentBefore = try daemon.memory("VmRSS")
        // Resets the peak (VmHWM) to what is resident now, so that the peak below is this read's.
        try? "5".write(toFile: "/proc/\(daemon.pid)/clear_refs", atomically: false, encoding: .utf8)
        let pages = (items + pageSize - 1) / pageSize
        let cpuBefore = try daemon.processCPUSeconds()
        let started = ContinuousClock.now
        try connection.send(#"{"op":"subscribe","feed":"news"}"#)
        for first in stride(from: 0, to: pages, by: 10_000) {
            try connection.send(#"{"op":"next","feed":"news","count":\#(min(10_000, pages - first))}"#)
        }
        var received = 0
        var lastPage: [UInt8] = []
        while received < pages {
            guard let line = try connection.readLine() else { throw TestFailure("the daemon closed the connection") }
            if line.starts(with: Array(#"{"type":"page""#.utf8)) {
                received += 1
                lastPage = line
            } else if line.starts(with: Array(#"{"type":"error""#.utf8)) {
                throw TestFailure("the daemon answered \(String(decoding: line, as: UTF8.self))")
            }
        }
        let elapsed = (ContinuousClock.now - started).seconds
        let cpuSeconds = try daemon.processCPUSeconds() - cpuBefore
        let peak = try daemon.memory("VmHWM")
        let last = try JSONValue(parsing: lastPage)
        guard last["items"]?.arrayValue?.count == items - (pages - 1) * pageSize, last["last"] == true else {
            throw TestFailure("the last page is not the document's last entries: \(String(decoding: lastPage.prefix(300), as: UTF8.self))")
        }
        var fast: Double?
        var slow: Double?
        if references, let python = ReferenceParsers.python() {
            let path = directory.path("feed.xml")
            try Data(document).write(to: URL(fileURLWithPath: path))
            (fast, slow) = try ReferenceParsers.itemsPerSecond(python: python, document: path, items: items)
        }
        return Measured(
            documentBytes: document.count, itemsPerSecond: Double(items) / elapsed,
            peakGrowth: Double(max(0, peak - residentBefore)) * 1024 / Double(document.count), cpuSeconds: cpuSeconds,
            fastFeedparserItemsPerSecond: fast, feedparserItemsPerSecond: slow)
    }

    /// An RSS 2.0 document of `items` items of about 470 bytes each, as a blog's feed has them:
    /// a title with an entity, a link, a guid, a date, an author, two categories and an escaped
    /// HTML description. Dates differ, so that ordering them is real work.
    static func document(items: Int) -> [UInt8] {
        var text = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
        text += #"<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel><title>Bench</title><link>https://example.com/</link>"#
        text += "<description>A large feed</description>\n"
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        for index in 0..<items {
            let date = "\(1 + index % 28) \(months[index / 28 % 12]) \(2000 + index / 336) \(index % 24):\(10 + index % 50):00 GMT"
            text += "<item><title>Entry \(index) about things &amp; stuff</title><link>https://example.com/posts/\(index)</link>"
            text += #"<guid isPermaLink="false">tag:example.com,2026:\#(index)</guid><pubDate>\#(date)</pubDate>"#
            text += "<dc:creator>Author \(index % 50)</dc:creator><category>topic \(index % 10)</category><category>news</category>"
            text += "<description>&lt;p&gt;The summary of entry \(index), with &lt;b&gt;some&lt;/b&gt; escaped HTML and enough text "
            text += "to look like a real description.&lt;/p&gt;</description></item>\n"
        }
        return Array((text + "</channel></rss>\n").utf8)
    }
}

/// fastfeedparser and feedparser, from PyPI, in the benchmark's own virtual environment
/// (`.build/bench-venv`, made once).
enum ReferenceParsers {
    static func python() -> String? {
        let directory = FileManager.default.currentDirectoryPath + "/.build/bench-venv"
        let python = directory + "/bin/python"
        if FileManager.default.isExecutableFile(atPath: python),
            (try? ChildProcess.run(python, ["-c", "import fastfeedparser, feedparser"]).status) == 0
        {
            return python
        }
        guard (try? ChildProcess.run("/usr/bin/env", ["python3", "-m", "venv", directory]).status) == 0,
            (try? ChildProcess.run(directory + "/bin/pip", ["install", "--quiet", "--disable-pip-version-check", "--timeout", "20",
                "fastfeedparser", "feedparser>=6,<7"]).status) == 0
        else { return nil }
        return python
    }

    /// Items per second of fastfeedparser (best of ``FeedScenarios/bestOf``) and feedparser (once) parsing the file.
    static func itemsPerSecond(python: String, document: String, items: Int) throws -> (fast: Double, slow: Double) {
        let script = """
            import sys, time, fastfeedparser, feedparser
            data = open(sys.argv[1], "rb").read()
            def timed(parse):
                started = time.perf_counter()
                result = parse(data)
                return time.perf_counter() - started, len(result["entries"])
            fast = min(timed(fastfeedparser.parse) for _ in range(\(FeedScenarios.bestOf)))
            slow = timed(feedparser.parse)
            print(fast[0], fast[1], slow[0], slow[1])
            """
        let result = try ChildProcess.run(python, ["-c", script, document])
        let numbers = result.output.split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        guard result.status == 0, numbers.count == 4, Int(numbers[1]) == items, Int(numbers[3]) == items else {
            throw TestFailure("the reference parsers failed: \(result.errors.suffix(500))")
        }
        return (Double(items) / numbers[0], Double(items) / numbers[2])
    }
}
