import ExecAdapter
import FeedKit
import Foundation
import Testing
import TestSupport

@Suite struct ExecSourceTests {
    static let jsonDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../examples/plugins/json-dir").standardized.path

    func adapter(directory: String, pageSize: Int = 2) throws -> ExecSource {
        try ExecSource(
            options: AdapterOptions(feed: "docs", values: ["command": [.string(Self.jsonDir)], "directory": .string(directory), "page_size": .integer(Int64(pageSize))]),
            context: AdapterConformance.context(feed: "docs"))
    }

    @Test func the_example_plugin_conforms() async throws {
        let directory = try TemporaryDirectory()
        for index in 1...5 { try directory.write("doc-\(index).json", #"{"title":"Document \#(index)"}"#) }
        let source = try adapter(directory: directory.path)
        let broken = try adapter(directory: directory.path("missing"))
        try await AdapterConformance.check(source, pages: .finite(3), failing: broken)
        await source.shutdown()
        await broken.shutdown()
    }

    /// A plugin that answers `configure` with `answer` and every fetch with one empty last page.
    func plugin(answering answer: String, in directory: TemporaryDirectory) throws -> ExecSource {
        let script = try directory.write("plugin", """
            #!/usr/bin/env python3
            import json, sys
            for line in sys.stdin:
                request = json.loads(line)
                print(json.dumps(\(answer) if request["op"] == "configure" else {"items": [], "next": None}), flush=True)
            """)
        chmod(script, 0o755)
        return try ExecSource(options: AdapterOptions(feed: "x", values: ["command": [.string(script)]]), context: AdapterConformance.context())
    }

    @Test func a_plugin_declares_in_its_configure_answer_whether_its_pages_can_be_fetched_again() async throws {
        let directory = try TemporaryDirectory()
        let unrepeatable = try plugin(answering: #"{"ok": True, "reproduces_pages": False}"#, in: directory)
        #expect(unrepeatable.reproducesPages, "true until the plugin has said otherwise")
        _ = try await unrepeatable.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "s"))
        #expect(!unrepeatable.reproducesPages)
        await unrepeatable.shutdown()

        // A plugin that does not say keeps working as before: its pages are taken to come back the same.
        let source = try adapter(directory: directory.path)
        _ = try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "s"))
        #expect(source.reproducesPages)
        await source.shutdown()

        let confused = try plugin(answering: #"{"ok": True, "reproduces_pages": "no"}"#, in: directory)
        let error = await #expect(throws: SourceError.self) { try await confused.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "s")) }
        #expect(error?.message.contains(#""reproduces_pages": "no", which is not true or false"#) == true, "\(String(describing: error))")
        await confused.shutdown()
    }

    @Test func items_keep_the_bytes_the_plugin_wrote_numbers_of_any_size_included() async throws {
        let directory = try TemporaryDirectory()
        let answer = #"{"items":[{"id":123456789012345678901234567890,"data":{"n":1e400, "big": -123456789012345678901234567890.5}},{"data":[1, 2]}],"next":null}"#
        let script = try directory.write("plugin", """
            #!/usr/bin/env python3
            import json, sys
            for line in sys.stdin:
                print('{"ok": true}' if json.loads(line)["op"] == "configure" else \(String(reflecting: answer)), flush=True)
            """)
        chmod(script, 0o755)
        let source = try ExecSource(options: AdapterOptions(feed: "x", values: ["command": [.string(script)]]), context: AdapterConformance.context())
        guard case .page(let items, .end) = try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "s")) else {
            Issue.record("no last page")
            return
        }
        #expect(items.map(\.dataText) == [#"{"n":1e400, "big": -123456789012345678901234567890.5}"#, "[1, 2]"])
        #expect(items.first?.id == "123456789012345678901234567890")
        #expect(items.last?.id == Item(hashing: [1, 2]).id, "an item without an id is known by the hash of its data")
        await source.shutdown()
    }

    @Test func a_command_that_is_not_executable_is_a_config_error() {
        #expect(throws: OptionError.self) {
            try ExecSource(options: AdapterOptions(feed: "x", values: ["command": ["/nonexistent/plugin"]]), context: AdapterConformance.context())
        }
        #expect(throws: OptionError.self) {
            try ExecSource(options: AdapterOptions(feed: "x", values: ["command": []]), context: AdapterConformance.context())
        }
    }
}
