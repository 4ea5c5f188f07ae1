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

    @Test func a_command_that_is_not_executable_is_a_config_error() {
        #expect(throws: OptionError.self) {
            try ExecSource(options: AdapterOptions(feed: "x", values: ["command": ["/nonexistent/plugin"]]), context: AdapterConformance.context())
        }
        #expect(throws: OptionError.self) {
            try ExecSource(options: AdapterOptions(feed: "x", values: ["command": []]), context: AdapterConformance.context())
        }
    }
}
