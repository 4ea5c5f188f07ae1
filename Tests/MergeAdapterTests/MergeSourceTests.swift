import FeedKit
@testable import MergeAdapter
import Testing
import TestSupport

/// The `merge` adapter over scripted member feeds (SPEC §9).
@Suite struct MergeSourceTests {
    static func source(
        _ feeds: ScriptedFeeds?, members: [String] = ["a", "b", "c"], order: String? = nil, field: String? = nil, pageSize: Int = 20,
        // Long enough that a loaded machine (the suite runs tests in parallel on two cores) never
        // times a member read out where a test does not mean it to.
        timeout: Duration = .seconds(60), sink: any LogSink = DiscardingSink()
    ) throws -> MergeSource {
        var values: [String: JSONValue] = ["feeds": .array(members.map(JSONValue.string)), "page_size": .integer(Int64(pageSize))]
        values["order"] = order.map(JSONValue.string)
        values["field"] = field.map(JSONValue.string)
        return try MergeSource(options: AdapterOptions(feed: "all", values: values), context: context(feeds, timeout: timeout, sink: sink))
    }

    static func context(_ feeds: ScriptedFeeds?, timeout: Duration = .seconds(60), sink: any LogSink = DiscardingSink()) -> AdapterContext {
        AdapterContext(
            feed: "all", requestTimeout: timeout, logger: Logger(sink: sink), transport: AdapterConformance.transport, feeds: feeds)
    }

    static func request(_ page: Int, _ token: String?) -> PageRequest {
        PageRequest(page: page, token: token, generation: 1, seed: "test")
    }

    static func page(_ result: FetchResult) throws -> (ids: [String], next: NextPage) {
        guard case .page(let items, let next) = result else { throw TestFailure("expected a page, got \(result)") }
        return (items.map(\.id), next)
    }

    /// Every page of the merged feed, following its tokens to the end (at most `limit` pages);
    /// `between` runs after each page, to change the members.
    static func walk(_ source: MergeSource, limit: Int = 20, between: (Int) -> Void = { _ in }) async throws -> [[String]] {
        var pages: [[String]] = []
        var token: String?
        for number in 1...limit {
            let (ids, next) = try page(try await source.fetch(request(number, token)))
            pages.append(ids)
            between(number)
            switch next {
            case .end: return pages
            case .more(let following), .later(let following): token = following
            }
        }
        throw TestFailure("no end after \(limit) pages: \(pages)")
    }

    static func threeMembers() -> ScriptedFeeds {
        ScriptedFeeds([
            "a": ScriptedFeeds.finite([["1", "2"], ["3", "4"]]),
            "b": ScriptedFeeds.finite([["1"]]),
            "c": ScriptedFeeds.finite([["1", "2"]]),
        ])
    }

    @Test func conforms() async throws {
        let broken = ScriptedFeeds(["a": ScriptedFeeds.Member(pages: [], failing: true)])
        try await AdapterConformance.check(
            try Self.source(Self.threeMembers(), pageSize: 3), pages: .finite(3), failing: try Self.source(broken, members: ["a"]))
    }

    @Test func round_robin_alternates_item_by_item_in_member_order_skipping_members_that_ended() async throws {
        let pages = try await Self.walk(try Self.source(Self.threeMembers(), pageSize: 2))
        #expect(pages == [["a:1", "b:1"], ["c:1", "a:2"], ["c:2", "a:3"], ["a:4"]], "the turn carries over from page to page")
    }

    @Test func concat_gives_all_of_one_member_then_the_next() async throws {
        let pages = try await Self.walk(try Self.source(Self.threeMembers(), order: "concat", pageSize: 3))
        #expect(pages == [["a:1", "a:2", "a:3"], ["a:4", "b:1", "c:1"], ["c:2"]])
    }

    @Test func newest_merges_members_newest_first_and_takes_an_item_without_the_field_at_once() async throws {
        func dated(_ id: String, _ published: String?) -> Item {
            Item(id: id, data: ["published": published.map(JSONValue.string) ?? .null])
        }
        let feeds = ScriptedFeeds([
            "a": ScriptedFeeds.Member(pages: [
                [dated("1", "2026-11-30T10:00:00Z"), dated("2", nil)], [dated("3", "2026-11-30T08:00:00Z")],
            ]),
            "b": ScriptedFeeds.Member(pages: [[dated("1", "2026-11-30T11:30:00+02:00"), dated("2", "2026-11-30T08:00:00.000Z")]]),
            "c": ScriptedFeeds.Member(pages: [[dated("1", "Mon, 30 Nov 2026 09:30:00 GMT")]]),
        ])
        let pages = try await Self.walk(try Self.source(feeds, order: "newest", field: "published", pageSize: 2))
        // b:1 is 09:30Z: after a:1 (10:00); a:2 has no time and comes at once after a:1; on a tie
        // (08:00) the earlier member comes first.
        #expect(pages == [["a:1", "a:2"], ["b:1", "c:1"], ["a:3", "b:2"]])
    }

    @Test func newest_compares_numbers_at_a_dot_path() async throws {
        func scored(_ id: String, _ score: JSONValue) -> Item { Item(id: id, data: ["stats": ["score": score]]) }
        let feeds = ScriptedFeeds([
            "a": ScriptedFeeds.Member(pages: [[scored("1", 5), scored("2", 3)]]),
            "b": ScriptedFeeds.Member(pages: [[scored("1", 4.5), scored("2", 1)]]),
        ])
        let pages = try await Self.walk(try Self.source(feeds, members: ["a", "b"], order: "newest", field: "stats.score"))
        #expect(pages == [["a:1", "b:1", "a:2", "b:2"]])
    }

    @Test func items_are_gathered_with_the_member_as_their_feed() async throws {
        let source = try Self.source(Self.threeMembers(), pageSize: 1)
        guard case .page(let items, _) = try await source.fetch(Self.request(1, nil)) else { throw TestFailure("no page") }
        #expect(items == [Item(id: "a:1", data: ["n": "1"], feed: "a")])
        #expect(source.memberFeeds == ["a", "b", "c"])
    }

    @Test func a_member_that_answers_it_has_no_more_pages_ends_and_an_empty_page_ends_the_merged_feed() async throws {
        let feeds = ScriptedFeeds([
            "a": ScriptedFeeds.Member(pages: [[ScriptedFeeds.item("1")]], lastPageSaysSo: false),
            "b": ScriptedFeeds.Member(pages: [[ScriptedFeeds.item("1")]], lastPageSaysSo: false),
        ])
        let pages = try await Self.walk(try Self.source(feeds, members: ["a", "b"], pageSize: 2))
        #expect(pages == [["a:1", "b:1"], []])
    }

    @Test func a_live_member_with_nothing_yet_keeps_its_place_and_the_merged_feed_waits_for_it() async throws {
        let feeds = ScriptedFeeds([
            "a": ScriptedFeeds.finite([["1", "2"]]),
            "b": ScriptedFeeds.Member(pages: [[ScriptedFeeds.item("1")]], live: true),
        ])
        let source = try Self.source(feeds, members: ["a", "b"])
        let first = try Self.page(try await source.fetch(Self.request(1, nil)))
        #expect(first.ids == ["a:1", "b:1", "a:2"])
        guard case .later(let token) = first.next else { throw TestFailure("a short page with a live member says later, not \(first.next)") }
        #expect(try await source.fetch(Self.request(2, token)) == .notYet)
        feeds.change("b") { $0.pages.append([ScriptedFeeds.item("2")]) }
        let second = try Self.page(try await source.fetch(Self.request(2, token)))
        #expect(second.ids == ["b:2"] && second.next != .end)
    }

    @Test func a_failing_member_is_left_out_until_it_answers_and_none_of_its_items_is_lost_or_repeated() async throws {
        let feeds = ScriptedFeeds([
            "a": ScriptedFeeds.finite([["1", "2"], ["3", "4"]]),
            "b": ScriptedFeeds.finite([["1", "2"], ["3"]]),
            "c": ScriptedFeeds.finite([["1"]]),
        ])
        feeds.change("b") { $0.failing = true }
        let sink = RecordingSink()
        let pages = try await Self.walk(try Self.source(feeds, pageSize: 2, sink: sink)) { number in
            if number == 2 { feeds.change("b") { $0.failing = false } }
        }
        #expect(pages == [["a:1", "c:1"], ["a:2", "a:3"], ["b:1", "a:4"], ["b:2", "b:3"]])
        let all = pages.flatMap { $0 }
        for member in ["a", "b", "c"] {
            let expected = try #require(["a": 4, "b": 3, "c": 1][member])
            #expect(all.filter { $0.hasPrefix("\(member):") } == (1...expected).map { "\(member):\($0)" })
        }
        #expect(sink.warnings.count == 2 && sink.warnings.allSatisfy { $0.contains("b (b is down)") }, "one warning per page: \(sink.warnings)")
    }

    @Test(arguments: ["round_robin", "concat"])
    func members_that_do_not_answer_in_time_cost_the_fetch_less_than_its_timeout(order: String) async throws {
        let feeds = Self.threeMembers()
        feeds.change("a") { $0.slow = true }
        feeds.change("c") { $0.slow = true }
        // The slow members never answer: the fetch returns at all only because it bounds its
        // reads (by half the timeout each, and three quarters in all).
        let source = try Self.source(feeds, order: order, timeout: .seconds(4))
        let page = try Self.page(try await source.fetch(Self.request(1, nil)))
        #expect(page.ids == ["b:1"])
        guard case .later = page.next else { throw TestFailure("the slow members' items are still to come, not \(page.next)") }
    }

    @Test func when_every_member_still_going_fails_the_fetch_fails_naming_them() async throws {
        let feeds = Self.threeMembers()
        feeds.change("a") { $0.failing = true }
        feeds.change("c") { $0.failing = true }
        feeds.change("b") { $0.pages = [] }
        await #expect(throws: SourceError.transient("feed all: every member still going failed: a (a is down); c (c is down)")) {
            try await Self.source(feeds).fetch(Self.request(1, nil))
        }
    }

    @Test func a_new_generation_of_a_member_fails_the_fetch_so_the_merged_feed_starts_a_new_one() async throws {
        let feeds = Self.threeMembers()
        let source = try Self.source(feeds, pageSize: 2)
        let first = try Self.page(try await source.fetch(Self.request(1, nil)))
        guard case .more(let token) = first.next else { throw TestFailure("expected more, got \(first.next)") }
        #expect(token == #"{"m":{"a":{"g":1,"o":1,"p":1},"b":{"e":true,"g":1,"o":1,"p":1},"c":{"g":1,"o":0,"p":1}},"t":2}"#)
        feeds.change("c") { $0.generation = 2 }
        await #expect(throws: SourceError.transient("member c started generation 2; the merged feed starts a new one")) {
            try await source.fetch(Self.request(2, token))
        }
    }

    @Test func a_page_asked_for_again_rereads_the_member_pages_and_comes_back_the_same() async throws {
        let feeds = Self.threeMembers()
        let source = try Self.source(feeds, order: "concat", pageSize: 3)
        let first = try await source.fetch(Self.request(1, nil))
        #expect(try await source.fetch(Self.request(1, nil)) == first)
        #expect(feeds.reads == ["a#1", "a#2", "a#1", "a#2"], "concat reads a member only when it comes to it")
    }

    @Test func without_other_feeds_it_is_configured_but_cannot_fetch() async throws {
        let source = try Self.source(nil)
        await #expect(throws: SourceError.self) { try await source.fetch(Self.request(1, nil)) }
    }

    @Test(arguments: [
        (["feeds": [] as JSONValue], "feeds", "must name at least one feed to merge"),
        ([:], "feeds", "is required"),
        (["feeds": ["a", "all"]], "feeds", "a merged feed cannot include itself (\"all\")"),
        (["feeds": ["a", "b", "a"]], "feeds", "\"a\" is named twice"),
        (["feeds": ["a"], "order": "oldest"], "order", "must be \"round_robin\", \"concat\" or \"newest\", got \"oldest\""),
        (["feeds": ["a"], "order": "newest"], "field",
            "is required with order = \"newest\": the dot path of the time or number to order by"),
        (["feeds": ["a"], "order": "newest", "field": "a..b"], "field",
            "\"a..b\" is not a dot path (names and array indexes between dots, such as \"published\")"),
        (["feeds": ["a"], "field": "published"], "field", "is only read by order = \"newest\", not \"round_robin\""),
    ] as [([String: JSONValue], String, String)])
    func option_errors_name_the_key(values: [String: JSONValue], key: String, message: String) {
        #expect(throws: OptionError(table: "feeds.all", key: key, message: message)) {
            try MergeSource(options: AdapterOptions(feed: "all", values: values), context: Self.context(nil))
        }
    }
}
