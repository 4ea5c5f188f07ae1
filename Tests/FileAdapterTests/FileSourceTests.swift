import FeedKit
import FileAdapter
import Foundation
import Testing
import TestSupport

@Suite struct FileSourceTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    func source(_ text: String, pageSize: Int = 2, follow: Bool = false) throws -> (FileSource, String) {
        let path = try directory.write("data.ndjson", text)
        let options = AdapterOptions(feed: "test", values: ["path": .string(path), "page_size": .integer(Int64(pageSize)), "follow": .bool(follow)])
        let context = AdapterConformance.context(timeout: .seconds(1))
        return (try FileSource(options: options, context: context), path)
    }

    /// Fetches every page in order until the source ends (or, following, has nothing yet).
    func allPages(_ source: FileSource) async throws -> [[Item]] {
        var pages: [[Item]] = []
        var token: String?
        for page in 1... {
            switch try await source.fetch(PageRequest(page: page, token: token, generation: 1, seed: "test")) {
            case .notYet:
                return pages
            case .page(let items, let next):
                pages.append(items)
                guard case .more(let nextToken) = next else { return pages }
                token = nextToken
            }
        }
        return pages
    }

    @Test func pages_hold_page_size_lines_with_line_numbers_as_ids() async throws {
        let (source, _) = try source("{\"a\":1}\n[2]\n\"three\"\n4\n5\n", pageSize: 2)
        let pages = try await allPages(source)
        #expect(pages.map { $0.map(\.id) } == [["1", "2"], ["3", "4"], ["5"]])
        #expect(pages[0].map(\.data) == [["a": 1], [2]])
        #expect(pages[1].map(\.data) == ["three", 4])
    }

    @Test func blank_lines_are_skipped_but_still_counted() async throws {
        let (source, _) = try source("one\n\n   \n\ttwo\r\nthree", pageSize: 5)
        let pages = try await allPages(source)
        #expect(pages.count == 1)
        #expect(pages[0].map(\.id) == ["1", "4", "5"])
        #expect(pages[0].map(\.data) == ["one", "\ttwo", "three"])
    }

    @Test func a_line_that_is_not_json_becomes_a_string() async throws {
        let (source, _) = try source("{broken json\nplain text ✓\n", pageSize: 5)
        #expect(try await allPages(source)[0].map(\.data) == ["{broken json", "plain text ✓"])
    }

    /// A page's lines are checked as JSON in one pass: lines that such a pass could misread (a value
    /// that runs on into the next line, two values on one line, a string left open) and lines only
    /// feedd's own check refuses must still each get the verdict, and keep the bytes, they get alone.
    /// The last line is a value and an object left open, which a pass over a page alone would
    /// take for the value (the json-lines fuzz target found it).
    @Test func a_page_checked_in_one_pass_gives_each_line_its_verdict_alone() async throws {
        let lines: [[UInt8]] = [
            #"{"a":1}"#, "[1,", "2] 3", "1 2", #""open"#, #""closed""#, #"{"a":1,"a":2}"#,
            "123456789012345678901234567890", String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
            "{\"b\":\r2}", "\u{0B}true", #"{"c":3}}"#, #"  { "spaced" : [ 1 , 2 ] }  "#, "null",
        ].map { Array($0.utf8) } + [[UInt8(ascii: "\""), 0xFF, UInt8(ascii: "\"")], Array(#"2{"""#.utf8)]
        let path = directory.path("mixed.ndjson")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(lines.joined(separator: [UInt8(ascii: "\n")]))))
        let options = AdapterOptions(feed: "test", values: ["path": .string(path), "page_size": .integer(Int64(lines.count))])
        let source = try FileSource(options: options, context: AdapterConformance.context(timeout: .seconds(1)))
        let items = try #require(try await allPages(source).first)
        let alone = lines.enumerated().map { number, line in
            RawJSON(validating: line).map { Item(id: String(number + 1), json: $0) }
                ?? Item(id: String(number + 1), data: .string(String(decoding: line, as: UTF8.self)))
        }
        #expect(items == alone)
        var together = JSONWriter(), each = JSONWriter()
        Item.write(items, to: &together)
        Item.write(alone, to: &each)
        #expect(together.bytes == each.bytes, "the page line differs from that of lines checked alone")
        let json = items.filter { $0.data != .string(String(decoding: lines[Int($0.id)! - 1], as: UTF8.self)) }
        #expect(json.map(\.id) == ["1", "6", "8", "13", "14"], "the lines that are JSON")
    }

    /// A page larger than the parser a thread keeps (1 MiB) is checked line by line instead.
    @Test func a_page_of_more_than_a_mebibyte_is_checked_line_by_line_alike() async throws {
        let lines = (1...100_000).map { $0 == 50_000 ? "not json" : #"{"n":\#($0)}"# }
        let (source, _) = try source(lines.joined(separator: "\n") + "\n", pageSize: lines.count)
        let items = try #require(try await allPages(source).first)
        #expect(items.count == lines.count)
        #expect(items[0] == Item(id: "1", data: ["n": 1]))
        #expect(items[49_999] == Item(id: "50000", data: "not json"))
        #expect(items[99_999] == Item(id: "100000", data: ["n": 100_000]))
    }

    /// Every request and result of a walk one page a call, from page 1 to the end.
    func walk(_ source: FileSource) async throws -> [(request: PageRequest, result: FetchResult)] {
        var walked: [(request: PageRequest, result: FetchResult)] = []
        var request = PageRequest(page: 1, token: nil, generation: 1, seed: "test")
        while true {
            let result = try await source.fetch(request)
            walked.append((request, result))
            guard case .page(_, next: .more(let token)) = result else { return walked }
            request = PageRequest(page: request.page + 1, token: token, generation: 1, seed: "test")
        }
    }

    /// 120 lines of every kind, 24 pages of 4: JSON of several shapes and spacings, text with
    /// quotes, backslashes and a control character, blank lines, a CRLF ending, and no line
    /// break after the last.
    static let mixedLines = (1...120).map { number in
        switch number % 9 {
        case 2: ""
        case 4: "not json \(number) \"quoted\" \\ \u{01}"
        case 6: #"{"n":\#(number)}"# + "\r"
        case 7: " \t "
        case 8: #"  [ 1 , {"deep":[[["x"]]]} , 2.50e3 ]  "#
        default: #"{"n":\#(number),"tags":["a","b"],"s":"é\u00e9\n"}"#
        }
    }

    /// A run of pages framed in one call, from any page on, is the pages fetched one a call:
    /// the same items (a line that is not JSON a string on its own page), the same tokens, and
    /// the same end, with blank lines, CRLF endings and an unterminated last line on the way.
    @Test func a_run_of_pages_in_one_call_is_the_pages_fetched_one_a_call() async throws {
        let (source, _) = try source(Self.mixedLines.joined(separator: "\n"), pageSize: 4)
        let walked = try await walk(source)
        #expect(walked.count == 24)
        for (index, (request, _)) in walked.enumerated() {
            for maxPages in [1, 3, 1_000] {
                let run = try await source.fetch(request, pages: maxPages)
                #expect(run == Array(walked[index...].prefix(maxPages).map(\.result)), "page \(request.page), \(maxPages) pages")
            }
        }
        // Page 7 by number alone starts a run alike.
        let direct = try await source.fetch(PageRequest(page: 7, token: nil, generation: 1, seed: "test"), pages: 5)
        #expect(direct == walked[6..<11].map(\.result))
    }

    /// The bytes a page line's `items` holds for `result`'s items, and what follows it.
    static func written(_ result: FetchResult) -> (bytes: [UInt8], next: NextPage?) {
        guard case .page(let items, let next) = result else { return ([], nil) }
        var writer = JSONWriter()
        Item.write(items, to: &writer)
        return (writer.bytes, next)
    }

    /// The same, for a page whose items the adapter wrote.
    static func written(_ result: WrittenFetchResult) -> (bytes: [UInt8], next: NextPage?) {
        guard case .page(let items, let next) = result else { return ([], nil) }
        var writer = JSONWriter()
        items.write(to: &writer)
        return (writer.bytes, next)
    }

    /// Written pages (no `Item` a line) are the pages of items down to the byte, from any page on
    /// and in runs of any length: JSON lines, lines that are not JSON, blank lines, CRLF endings,
    /// an unterminated last line, and the items read back from the written bytes are the same.
    @Test func written_pages_are_the_pages_of_items_byte_for_byte() async throws {
        let (source, _) = try source(Self.mixedLines.joined(separator: "\n"), pageSize: 4)
        let walked = try await walk(source)
        #expect(walked.count == 24)
        for (index, (request, _)) in walked.enumerated() {
            for maxPages in [1, 5] {
                let written = try await source.fetch(request, writtenPages: maxPages)
                let expected = Array(walked[index...].prefix(maxPages).map(\.result))
                #expect(written.count == expected.count, "page \(request.page), \(maxPages) pages")
                for (page, result) in zip(written, expected) {
                    let (bytes, next) = Self.written(page), (itemBytes, itemNext) = Self.written(result)
                    #expect(next == itemNext)
                    #expect(bytes == itemBytes, "page \(request.page): \(String(decoding: bytes, as: UTF8.self))")
                    if case .page(let writtenItems, _) = page, case .page(let items, _) = result {
                        #expect(writtenItems.items == items)
                        #expect(writtenItems.count == items.count)
                    }
                }
            }
        }
        // By number alone, and past the end.
        let direct = try await source.fetch(PageRequest(page: 7, token: nil, generation: 1, seed: "test"), writtenPages: 3)
        #expect(direct.map { Self.written($0).bytes } == walked[6..<9].map { Self.written($0.result).bytes })
        let beyond = try await source.fetch(PageRequest(page: 99, token: nil, generation: 1, seed: "test"), writtenPages: 3)
        #expect(beyond.map { Self.written($0).bytes } == [Array("[]".utf8)])
        #expect(beyond.map { Self.written($0).next } == [.end])
    }

    /// Hostile lines (not JSON, not UTF-8, nested past the limit, a carriage return or a control
    /// character inside, a NUL) are written as the strings their items hold, as before: the
    /// written bytes are the items' bytes, one valid JSON text with no line break.
    @Test func written_hostile_lines_are_refused_as_json_as_items_are() async throws {
        let lines: [[UInt8]] = [
            #"{"a":1}"#, "[1,", #""open"#, String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
            String(repeating: "[", count: 512) + String(repeating: "]", count: 512), "{\"b\":\r2}", #"{"c":3}}"#, "null",
        ].map { Array($0.utf8) } + [
            [UInt8(ascii: "\""), 0xFF, UInt8(ascii: "\"")], [0xC0, 0x80], [UInt8(ascii: "\""), 0xED, 0xA0, 0x80, UInt8(ascii: "\"")],
            [UInt8(ascii: "\""), 0x00, UInt8(ascii: "\"")], [0x01, 0x1F, 0x7F], Array(#"{"k":"\#u{7}"}"#.utf8),
        ]
        let path = directory.path("hostile.ndjson")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(lines.joined(separator: [UInt8(ascii: "\n")]))))
        let options = AdapterOptions(feed: "test", values: ["path": .string(path), "page_size": .integer(Int64(lines.count))])
        let source = try FileSource(options: options, context: AdapterConformance.context(timeout: .seconds(1)))
        let request = PageRequest(page: 1, token: nil, generation: 1, seed: "test")
        let written = try await source.fetch(request, writtenPages: 1)
        let items = try await source.fetch(request, pages: 1)
        let bytes = Self.written(written[0]).bytes
        #expect(bytes == Self.written(items[0]).bytes)
        #expect(!bytes.contains(0x0A) && !bytes.contains(0x0D))
        #expect(String(validating: bytes, as: UTF8.self) != nil, "the written items are UTF-8")
        // One JSON text, but for the line nested to the limit, which the array nests two levels deeper.
        let shallow = Array(lines.prefix(4)) + Array(lines.dropFirst(5))
        let (shallowText, shallowEnds) = (Array(shallow.joined(separator: [UInt8(ascii: "\n")])), shallow.reduce(into: [Int]()) { $0.append(($0.last.map { $0 + 1 } ?? 0) + $1.count) })
        var shallowBytes = JSONWriter()
        WrittenItems(lines: shallowText, endingAt: shallowEnds, numbers: Array(1...shallow.count)).write(to: &shallowBytes)
        #expect(RawJSON(validating: shallowBytes.bytes) != nil, "the written items are one JSON text")
        guard case .page(let writtenItems, _) = written[0] else { throw TestFailure("expected a page") }
        let alone = lines.enumerated().map { number, line in
            RawJSON(validating: line).map { Item(id: String(number + 1), json: $0) }
                ?? Item(id: String(number + 1), data: .string(String(decoding: line, as: UTF8.self)))
        }
        #expect(writtenItems.items == alone)
        let json = writtenItems.items.filter { $0.data != .string(String(decoding: lines[Int($0.id)! - 1], as: UTF8.self)) }.map(\.id)
        #expect(json.contains("1") && json.contains("8") && !json.contains("4") && !json.contains("9"), "the lines that are JSON: \(json)")
    }

    /// Written items made directly: empty, all JSON (the exact-size path), and ids of every width.
    @Test func written_items_of_lines_are_written_as_items_are() {
        for (text, ends, numbers) in [
            ([UInt8](), [Int](), [Int]()), (Array("1".utf8), [1], [0]),
            (Array("1\n{}\n\"x\"".utf8), [1, 4, 8], [9, 10, 1_234_567_890_123]), (Array("\n2".utf8), [0, 2], [1, 2]),
        ] {
            let written = WrittenItems(lines: text, endingAt: ends, numbers: numbers)
            var start = 0
            let items = zip(ends, numbers).map { end, number in
                defer { start = end + 1 }
                let line = text[start..<end]
                return RawJSON(validating: line).map { Item(id: String(number), json: $0) } ?? Item(id: String(number), data: .string(String(decoding: line, as: UTF8.self)))
            }
            var mine = JSONWriter(), theirs = JSONWriter()
            written.write(to: &mine)
            Item.write(items, to: &theirs)
            #expect(mine.bytes == theirs.bytes)
            #expect(written.count == items.count)
            #expect(written.items == items)
        }
    }

    /// A run stops after about a thousand lines, so its first page never waits long for its last.
    @Test func a_run_of_one_call_stops_after_about_a_thousand_lines() async throws {
        let (small, _) = try source((1...3_000).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n", pageSize: 2)
        let run = try await small.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test"), pages: 10_000)
        #expect(run.count == 500)
        #expect(run.last == .page([Item(id: "999", data: ["n": 999]), Item(id: "1000", data: ["n": 1_000])], next: .more(token: "9893:1001")))
        let (large, _) = try source((1...3_000).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n", pageSize: 1_000)
        #expect(try await large.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test"), pages: 3).count == 1, "a page of a thousand lines comes alone")
    }

    /// Following, a run ends at the first short page, which says to look again later.
    @Test func a_run_of_a_followed_file_ends_where_the_written_lines_do() async throws {
        let (source, _) = try source("1\n2\n3\n4\n5\npart", pageSize: 2, follow: true)
        let run = try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test"), pages: 10)
        #expect(run == [
            .page([Item(id: "1", data: 1), Item(id: "2", data: 2)], next: .more(token: "4:3")),
            .page([Item(id: "3", data: 3), Item(id: "4", data: 4)], next: .more(token: "8:5")),
            .page([Item(id: "5", data: 5)], next: .later(token: "10:6")),
        ])
        #expect(try await source.fetch(PageRequest(page: 4, token: "10:6", generation: 1, seed: "test"), pages: 10) == [.notYet])
    }

    @Test func the_last_page_says_end_even_when_it_is_full() async throws {
        let (source, _) = try source("1\n2\n3\n4\n\n\n", pageSize: 2)
        let second = try await source.fetch(PageRequest(page: 2, token: "4:3", generation: 1, seed: "test"))
        #expect(second == .page([Item(id: "3", data: 3), Item(id: "4", data: 4)], next: .end))
    }

    @Test func an_empty_file_is_one_empty_last_page() async throws {
        let (source, _) = try source("")
        #expect(try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test")) == .page([], next: .end))
    }

    @Test func a_page_asked_for_again_comes_back_the_same() async throws {
        let (source, _) = try source("a\nb\nc\nd\n")
        let first = try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test"))
        guard case .page(_, .more(let token)) = first else { Issue.record("no second page"); return }
        let second = try await source.fetch(PageRequest(page: 2, token: token, generation: 1, seed: "test"))
        #expect(try await source.fetch(PageRequest(page: 2, token: token, generation: 1, seed: "test")) == second)
    }

    @Test func following_waits_for_complete_lines() async throws {
        let (source, path) = try source("one\ntwo\nthree\npart", pageSize: 2, follow: true)
        let pages = try await allPages(source)
        #expect(pages.map { $0.map(\.id) } == [["1", "2"], ["3"]])
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data("ial\n".utf8))
        try handle.close()
        let resumed = try await source.fetch(PageRequest(page: 3, token: "14:4", generation: 1, seed: "test"))
        #expect(resumed == .page([Item(id: "4", data: "partial")], next: .later(token: "22:5")), "a short page: look again only later")
    }

    @Test func a_malformed_position_token_is_refused_not_misread() async throws {
        let (source, _) = try source("1\n2\n3\n4\n", pageSize: 2)
        for token in ["", "x", "4", "4:", ":3", "4:0", "-4:3", "4:3:", "4:+3", "4:3 ", "1234567890123456789:3", "4:٣"] {
            await #expect(throws: SourceError.rejected("invalid file position token \"\(token)\""), "token \(token)") {
                try await source.fetch(PageRequest(page: 2, token: token, generation: 1, seed: "test"))
            }
        }
        let second = try await source.fetch(PageRequest(page: 2, token: "4:3", generation: 1, seed: "test"))
        #expect(second == .page([Item(id: "3", data: 3), Item(id: "4", data: 4)], next: .end))
    }

    @Test func a_missing_file_is_an_upstream_error_not_a_crash() async throws {
        let (source, path) = try source("x\n")
        try FileManager.default.removeItem(atPath: path)
        await #expect(throws: SourceError.self) { try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test")) }
    }

    @Test func options_are_validated() throws {
        let context = AdapterConformance.context(feed: "f", timeout: .seconds(1))
        #expect(throws: OptionError(table: "feeds.f", key: "path", message: "is required")) {
            try FileSource(options: AdapterOptions(feed: "f", values: [:]), context: context)
        }
        #expect(throws: OptionError.self) {
            try FileSource(options: AdapterOptions(feed: "f", values: ["path": "relative/path"]), context: context)
        }
        #expect(throws: OptionError.self) {
            try FileSource(options: AdapterOptions(feed: "f", values: ["path": "/x", "page_size": 0]), context: context)
        }
    }
}

@Suite struct FileSourceConformanceTests {
    @Test func conforms() async throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("data.ndjson", (1...7).map { "{\"n\":\($0)}" }.joined(separator: "\n"))
        let context = AdapterConformance.context()
        let source = try FileSource(options: AdapterOptions(feed: "f", values: ["path": .string(path), "page_size": 3]), context: context)
        let missing = try FileSource(options: AdapterOptions(feed: "f", values: ["path": .string(directory.path("none"))]), context: context)
        try await AdapterConformance.check(source, pages: .finite(3), failing: missing)
    }
}
