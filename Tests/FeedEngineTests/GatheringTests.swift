import FeedKit
import FileAdapter
import Testing

@testable import FeedEngine

/// Feeds that gather others (`merge`, SPEC §9), below the adapter: the configuration checks
/// their members, the engine reads members like any subscriber, and generations cascade.
@MainActor
@Suite(.timeLimit(.minutes(1))) struct GatheringTests {
    let loader = ConfigurationLoader(
        registry: AdapterRegistry([FileSource.self, Gathering.self]), logger: Logger(sink: NoLog()), transport: CurlTransport())

    func problems(_ text: String) -> [String] {
        do {
            _ = try loader.load(text: text, named: "test.toml", dropInDirectory: nil)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    @Test func a_member_that_is_not_configured_is_an_error_at_its_key() {
        #expect(problems("""
            [feeds.all]
            source = "gathering"
            feeds = ["nope"]
            """) == [#"test.toml:3:1: feeds.all.feeds: no feed "nope" in this configuration"#])
    }

    @Test func a_feed_that_gathers_itself_through_others_is_an_error() {
        let found = problems("""
            [feeds.a]
            source = "gathering"
            feeds = ["b"]

            [feeds.b]
            source = "gathering"
            feeds = ["a"]
            """)
        #expect(found == [
            "test.toml:3:1: feeds.a.feeds: the feed gathers itself (a → b → a)",
            "test.toml:7:1: feeds.b.feeds: the feed gathers itself (b → a → b)",
        ])
    }

    @Test func a_member_is_read_through_a_subscription_of_the_engine_and_its_refresh_refreshes_the_gatherer() async throws {
        let world = ScriptedWorld(prefetch: 1, encoder: ItemsEncoder())
        let reader = EngineFeedReader()
        reader.service = world.service
        var gatherer = FeedSettings(name: "all", source: "gathering", prefetch: 0)
        gatherer.options = ["feeds": ["scripted"]]
        world.directory.apply([
            world.definition(),
            FeedDefinition(settings: gatherer, adapter: Gathering(members: ["scripted"])),
        ])
        let read = Task { try await reader.page(1, of: "scripted", for: "all", timeout: .seconds(5)) }
        // The read reaches the feed through tasks of its own (on the shared pool, slow when other
        // suites load it): wait for the fetch it causes, within the read's own timeout.
        let deadline = ContinuousClock.now + .seconds(4)
        while world.script.pendingCalls.isEmpty, ContinuousClock.now < deadline { await world.settle() }
        world.script.answer(.page(items: 2, next: .more(token: nil)))
        await world.settle()
        #expect(try await read.value == .page(generation: 1, items: [Item(id: "1-1", data: 1), Item(id: "1-2", data: 2)], isLast: false))
        #expect(world.feed.subscriberCount == 1, "the gatherer follows its member, and keeps following it after the read")

        let gathered = try #require(world.directory["all"])
        world.directory.refresh("scripted")
        await world.settle()
        #expect(world.feed.generation == 2 && gathered.generation == 2, "a member's new generation starts one of the gatherer")
        world.directory.refresh("all")
        await world.settle()
        #expect(world.feed.generation == 3 && gathered.generation == 3, "refreshing the gatherer refreshes its member, and itself once")
    }
}

/// A gathering source for the configuration checks: it names its members and fetches nothing.
struct Gathering: SourceAdapter {
    static let sourceName = "gathering"
    let members: [String]

    init(members: [String]) {
        self.members = members
    }

    init(options: AdapterOptions, context: AdapterContext) throws {
        members = try options.stringArray("feeds") ?? []
    }

    var memberFeeds: [String] { members }

    func fetch(_ request: PageRequest) async throws -> FetchResult {
        .page([], next: .end)
    }
}
