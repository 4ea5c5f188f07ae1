import FeedKit
import Foundation
import Testing
import TestSupport

/// The `merge` adapter through the real daemon (SPEC §9): members read through the engine,
/// their generations followed, and the configuration checked.
@Suite struct MergeEndToEndTests {
    static func daemon(order: String = "round_robin", extra: String = "") throws -> DaemonProcess {
        let directory = try TemporaryDirectory()
        let notes = try directory.write("notes.ndjson", "call Ana\nbuy bread\nwater plants\n")
        let todo = try directory.write("todo.ndjson", #"{"task":"fix the gate"}"# + "\n" + #"{"task":"paint"}"# + "\n")
        return try DaemonProcess(config: """
            [feeds.notes]
            source = "file"
            path = "\(notes)"
            page_size = 2

            [feeds.todo]
            source = "file"
            path = "\(todo)"
            page_size = 1

            [feeds.desk]
            source = "merge"
            feeds = ["notes", "todo"]
            order = "\(order)"
            page_size = 3
            \(extra)
            """, directory: directory)
    }

    static func ids(_ page: JSONValue) -> [String] {
        page["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    @Test func a_merged_feed_interleaves_its_members_item_by_item_to_their_end() throws {
        let daemon = try Self.daemon()
        let client = try daemon.connect()
        try client.send("next desk 3")
        try client.expect("subscribed")
        let first = try client.expect("page")
        #expect(Self.ids(first) == ["notes:1", "todo:1", "notes:2"])
        #expect(first["items"]?.arrayValue?[1] == ["id": "todo:1", "feed": "todo", "data": ["task": "fix the gate"]])
        let (rest, end) = try client.read(until: "end")
        let pages = rest.filter { $0["type"] == "page" }
        #expect(pages.flatMap(Self.ids) == ["todo:2", "notes:3"], "every member's items once, in member order")
        #expect(pages.last?["last"] == true && end["page"] == 2)
        withExtendedLifetime(daemon) {}
    }

    @Test func concat_gives_all_of_one_member_then_the_next() throws {
        let daemon = try Self.daemon(order: "concat")
        let client = try daemon.connect()
        try client.send("next desk 5")
        try client.expect("subscribed")
        let (messages, _) = try client.read(until: "end")
        #expect(messages.filter { $0["type"] == "page" }.flatMap(Self.ids) == ["notes:1", "notes:2", "notes:3", "todo:1", "todo:2"])
        withExtendedLifetime(daemon) {}
    }

    @Test func refreshing_a_member_or_the_merged_feed_starts_a_new_merged_generation() throws {
        let daemon = try Self.daemon()
        let reader = try daemon.connect()
        try reader.send("next desk")
        try reader.expect("subscribed")
        _ = try reader.expect("page")
        #expect(try daemon.connect().request("refresh notes")["generation"] == 2)
        #expect(try reader.expect("refreshed")["generation"] == 2, "a member's new generation is one of the merged feed")
        #expect(try daemon.connect().request("refresh desk")["generation"] == 3)
        #expect(try reader.expect("refreshed")["generation"] == 3)
        let status = try daemon.connect().request("status")
        let generations = Dictionary(uniqueKeysWithValues: (status["feeds"]?.arrayValue ?? []).map { ($0["name"]?.stringValue ?? "", $0["generation"]) })
        #expect(generations["notes"] == 3 && generations["todo"] == 2, "refreshing the merged feed refreshed its members once")
        try reader.send("next desk")
        #expect(Self.ids(try reader.read(until: "page").found) == ["notes:1", "todo:1", "notes:2"])
    }

    @Test func an_unknown_member_or_a_cycle_is_a_config_error() throws {
        let directory = try TemporaryDirectory()
        let config = try directory.write("feedd.toml", """
            [feeds.a]
            source = "merge"
            feeds = ["b"]

            [feeds.b]
            source = "merge"
            feeds = ["a", "ghost"]
            """)
        let result = try ChildProcess.run(FeeddBinaries.feedd, ["check-config", "--config", config])
        #expect(result.status == 2)
        #expect(result.output.contains("\(config):3:1: feeds.a.feeds: the feed gathers itself (a → b → a)"), "\(result.output)")
        #expect(result.output.contains(#"\#(config):7:1: feeds.b.feeds: no feed "ghost" in this configuration"#), "\(result.output)")
    }
}
