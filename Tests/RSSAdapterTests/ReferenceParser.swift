import FeedKit
import Foundation
import Testing
import TestSupport

/// feedparser 6 (Python's Universal Feed Parser, the parser feed readers are measured against) in
/// a virtual environment of its own, with the test documents of its source distribution, both
/// from PyPI. Made once under `.build/rss-agreement/` and kept there; a test that needs it is
/// cancelled, saying why, when PyPI (or python3) cannot be reached.
struct ReferenceParser {
    /// The virtual environment's Python.
    let python: String
    /// feedparser's `tests` directory.
    let documents: String
    let version: String

    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/rss-agreement").path

    /// The reference, made if it is not there yet.
    static func prepared() throws -> ReferenceParser {
        let venv = directory + "/venv"
        let python = venv + "/bin/python"
        let stamp = directory + "/ready"
        if let version = try? String(contentsOfFile: stamp, encoding: .utf8) {
            return ReferenceParser(python: python, documents: directory + "/feedparser-\(version)/tests", version: version)
        }
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard let system = ["/usr/bin/python3", "/usr/local/bin/python3"].first(where: FileManager.default.isExecutableFile(atPath:))
            ?? which("python3")
        else { try Test.cancel("python3 is not installed, so feedparser cannot be run") }
        try step(system, ["-m", "venv", venv], "making a virtual environment")
        let pip = [venv + "/bin/pip", "--disable-pip-version-check", "--quiet", "--timeout", "20", "--retries", "1"]
        try step(pip[0], Array(pip.dropFirst()) + ["install", "feedparser>=6,<7"], "installing feedparser from PyPI")
        let version = try step(python, ["-c", "import feedparser; print(feedparser.__version__)"], "asking feedparser its version")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try step(pip[0], Array(pip.dropFirst()) + ["download", "--no-binary", ":all:", "--no-deps", "-d", directory, "feedparser==\(version)"],
            "downloading feedparser's source distribution (its test documents) from PyPI")
        try step(python, ["-c", "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])",
            directory + "/feedparser-\(version).tar.gz", directory], "unpacking feedparser's source distribution")
        try version.write(toFile: stamp, atomically: true, encoding: .utf8)
        return ReferenceParser(python: python, documents: directory + "/feedparser-\(version)/tests", version: version)
    }

    /// Runs a preparation step; a failure cancels the test with what the tool said (PyPI is
    /// unreachable, most likely), after removing the half-made directory.
    @discardableResult
    private static func step(_ executable: String, _ arguments: [String], _ what: String) throws -> String {
        let result = try ChildProcess.run(executable, arguments)
        guard result.status == 0 else {
            try? FileManager.default.removeItem(atPath: directory)
            let said = (result.errors + result.output).split(separator: "\n").suffix(3).joined(separator: " / ")
            try Test.cancel("feedparser is not available: \(what) failed (exit \(result.status)): \(said)")
        }
        return result.output
    }

    private static func which(_ command: String) -> String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(command)" }
            .first(where: FileManager.default.isExecutableFile(atPath:))
    }

    /// What feedparser reads of each of `paths` (fetched from `base` over HTTP, as a feed reader
    /// fetches them), by path: its verdict on the XML and its entries, normalised as
    /// ``AgreementEntry`` says.
    func read(_ paths: [String], from base: String) throws -> [String: (bozo: String?, entries: [AgreementEntry])] {
        let work = try TemporaryDirectory()
        let script = try work.write("read.py", Self.script)
        let listing = try work.write("paths.txt", paths.joined(separator: "\n"))
        let output = work.path("entries.json")
        let result = try ChildProcess.run(python, [script, base, listing, output])
        guard result.status == 0 else { throw TestFailure("feedparser failed: \(result.errors.suffix(2000))") }
        let documents = try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: output))))
        var read: [String: (bozo: String?, entries: [AgreementEntry])] = [:]
        for (path, document) in documents.objectValue ?? [:] {
            let entries = document["entries"]?.arrayValue?.map(AgreementEntry.init) ?? []
            read[path] = (document["bozo"]?.stringValue, entries)
        }
        return read
    }

    /// feedparser with its HTML sanitizer and its rewriting of links inside HTML off: feedd gives
    /// HTML as the feed wrote it (a client sanitizes what it shows). Fields are read from the
    /// entries' own dictionaries, past FeedParserDict's fallbacks (`updated` standing in for a
    /// missing `published`).
    private static let script = #"""
        import json, sys, warnings, feedparser
        warnings.simplefilter("ignore")
        base, listing, output = sys.argv[1:4]

        def text(value):
            if value is None:
                return None
            value = value.strip()
            return value or None

        def when(parsed):
            if not parsed:
                return None
            return "%04d-%02d-%02dT%02d:%02d:%02dZ" % tuple(parsed[:6])

        read = {}
        for path in open(listing).read().split("\n"):
            result = feedparser.parse(base + "/" + path, sanitize_html=False, resolve_relative_uris=False)
            bozo = type(result.get("bozo_exception")).__name__ if result.get("bozo") else None
            entries = []
            for entry in result.entries:
                get = lambda key: dict.get(entry, key)
                detail = get("author_detail") or {}
                terms = []
                for tag in get("tags") or []:
                    term = text(tag.get("term"))
                    if term and term not in terms:
                        terms.append(term)
                entries.append({
                    "title": text(get("title")), "link": text(get("link")),
                    "published": when(get("published_parsed")), "updated": when(get("updated_parsed")),
                    "summary": text(get("summary")), "author": text(get("author")), "author_name": text(detail.get("name")),
                    "categories": terms,
                })
            read[path] = {"bozo": bozo, "entries": entries}
        json.dump(read, open(output, "w"))
        """#
}
