import FeedKit
import Foundation
@testable import RSSAdapter
import Testing
import TestSupport

/// feedd against the reference parser, document by document (README, "Agreement with feedparser").
///
/// The documents are feedparser 6's own public test documents, served over loopback HTTP with
/// the headers each names (`Header: Content-type: …`), and read by both: by feedparser fetching
/// them, and by the `rss` adapter fetching them. Those that are well-formed XML (feedparser's
/// strict parser took them: no `bozo` exception but `NonXMLContentType`) and have entries are
/// compared: same number of entries, and each entry of one has an entry of the other with the
/// same value in every field, after these normalisations:
///
/// - text is compared without white space at either end, and an empty text is null;
/// - times are compared to the second, in UTC, and as the pairs `published ?? updated` and
///   `updated ?? published` (feedparser files `dc:date` as `updated` alone; feedd fills both);
/// - an author is feedparser's `author_detail.name` when it has one (feedparser's `author` joins
///   an Atom author's name and email as `name (email)`), else its `author`;
/// - categories are feedparser's `tags`' terms, in order, each once;
/// - entries are compared as a set (feedd pages them newest first, feedparser keeps document order);
/// - feedparser runs with `sanitize_html=False` and `resolve_relative_uris=False`: feedd gives HTML
///   as the feed wrote it.
@Suite struct AgreementTests {
    static let target = 0.95

    @Test(.timeLimit(.minutes(10)))
    func feedd_serves_what_feedparser_reads_for_at_least_95_percent_of_its_test_documents() async throws {
        let reference = try ReferenceParser.prepared()
        let upstream = try LoopbackUpstream()
        let paths = try Self.serveDocuments(reference.documents, on: upstream)
        let read = try reference.read(paths, from: upstream.baseURL)
        let population = read.filter { ($0.value.bozo == nil || $0.value.bozo == "NonXMLContentType") && !$0.value.entries.isEmpty }
        var disagreements: [String] = []
        for (path, expected) in population.sorted(by: { $0.key < $1.key }) {
            if let difference = try await Self.difference(path, expected: expected.entries, upstream: upstream) {
                disagreements.append("\(path): \(difference)")
            }
        }
        let agreeing = population.count - disagreements.count
        let share = Double(agreeing) / Double(max(population.count, 1))
        let summary = "feedd agrees with feedparser \(reference.version) on \(agreeing) of \(population.count) documents"
            + " (\(String(format: "%.1f", share * 100))%)"
        try ([summary, ""] + disagreements).joined(separator: "\n").write(
            toFile: ReferenceParser.directory + "/report.txt", atomically: true, encoding: .utf8)
        print(summary + "; the documents it does not agree on are in \(ReferenceParser.directory)/report.txt")
        #expect(population.count > 1_000, "feedparser's test documents: \(population.count) with entries")
        #expect(share >= Self.target, "\(summary)\n\(disagreements.prefix(40).joined(separator: "\n"))")
    }

    /// Serves every test document at its path, with the headers it names; returns the paths.
    /// Documents that test HTTP itself (statuses, redirects, compression) are left out.
    static func serveDocuments(_ root: String, on upstream: LoopbackUpstream) throws -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: root)
        var paths: [String] = []
        while let path = enumerator?.nextObject() as? String {
            guard path.hasSuffix(".xml"), !path.hasPrefix("http/"), !path.hasPrefix("compression/") else { continue }
            let body = [UInt8](try Data(contentsOf: URL(fileURLWithPath: root + "/" + path)))
            var headers = headerLines(body)
            guard !headers.contains(where: { $0.name.lowercased() == "status" }) else { continue }
            let contentType = headers.first { $0.name.lowercased() == "content-type" }?.value ?? "application/xml"
            headers.removeAll { $0.name.lowercased() == "content-type" }
            upstream.setResource("/" + path, LoopbackUpstream.Resource(body: body, contentType: contentType, headers: headers))
            paths.append(path)
        }
        return paths.sorted()
    }

    /// The `Header: Name: value` lines of a test document, as feedparser's test server reads them.
    private static func headerLines(_ body: [UInt8]) -> [(name: String, value: String)] {
        String(decoding: body.prefix(4096), as: UTF8.self).split(separator: "\n").compactMap { line in
            guard line.hasPrefix("Header:") else { return nil }
            let field = line.dropFirst("Header:".count)
            guard let colon = field.firstIndex(of: ":") else { return nil }
            return (field[..<colon].trimmingCharacters(in: .whitespaces), field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
    }

    /// Why what feedd serves for `path` differs from `expected`; nil when it agrees.
    static func difference(_ path: String, expected: [AgreementEntry], upstream: LoopbackUpstream) async throws -> String? {
        let source = try RSSSource(
            options: AdapterOptions(feed: "agreement", values: ["url": .string(upstream.baseURL + "/" + path), "page_size": 100_000]),
            context: AdapterConformance.context())
        let served: [AgreementEntry]
        do {
            guard case .page(let items, _) = try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "agreement")) else {
                return "no page"
            }
            served = items.map { AgreementEntry($0.data) }
        } catch {
            return "refused: \(error)"
        }
        guard served.count == expected.count else { return "\(served.count) entries, feedparser \(expected.count)" }
        var unmatched = expected
        for entry in served {
            guard let index = unmatched.firstIndex(where: { entry.agrees(with: $0) }) else {
                let closest = unmatched.min { entry.differences(from: $0).count < entry.differences(from: $1).count }!
                return entry.differences(from: closest).joined(separator: "; ")
            }
            unmatched.remove(at: index)
        }
        return nil
    }
}

/// An entry's fields as the agreement test compares them (see ``AgreementTests``).
struct AgreementEntry: Sendable {
    var title: String?
    var link: String?
    var published: String?
    var updated: String?
    var summary: String?
    var author: String?
    /// feedparser's `author_detail.name`.
    var authorName: String?
    var categories: [String]

    /// An entry from feedd's item data, or from what the reference script wrote (which names
    /// `author_detail.name` `author_name`); feedd's times are cut to the second.
    init(_ data: JSONValue) {
        func text(_ key: String) -> String? { data[key]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } }
        func second(_ key: String) -> String? { text(key).map { $0.count > 20 ? String($0.prefix(19)) + "Z" : $0 } }
        title = text("title")
        link = text("link")
        published = second("published")
        updated = second("updated")
        summary = text("summary")
        author = text("author")
        authorName = text("author_name")
        categories = data["categories"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    func agrees(with reference: AgreementEntry) -> Bool {
        differences(from: reference).isEmpty
    }

    /// The fields of this (feedd's) entry that differ from `reference` (feedparser's), each
    /// with both values.
    func differences(from reference: AgreementEntry) -> [String] {
        var found: [String] = []
        func compare(_ name: String, _ mine: String?, _ theirs: String?) {
            if mine != theirs { found.append("\(name) \(Self.quoted(mine)), feedparser \(Self.quoted(theirs))") }
        }
        compare("title", title, reference.title)
        compare("link", link, reference.link)
        compare("published", published ?? updated, reference.published ?? reference.updated)
        compare("updated", updated ?? published, reference.updated ?? reference.published)
        compare("summary", summary, reference.summary)
        if author != reference.authorName ?? reference.author, author != reference.author {
            compare("author", author, reference.authorName ?? reference.author)
        }
        if categories != reference.categories { found.append("categories \(categories), feedparser \(reference.categories)") }
        return found
    }

    private static func quoted(_ text: String?) -> String {
        guard let text else { return "null" }
        return "\"" + (text.count > 120 ? text.prefix(120) + "…" : text) + "\""
    }
}
