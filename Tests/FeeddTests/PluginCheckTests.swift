import Foundation
import Testing
import TestSupport

/// `feedd plugin check` (issue 28): an exec plugin's author runs the adapter conformance checks
/// without writing a Swift test, and reads what is wrong in the plugin's terms.
@Suite struct PluginCheckTests {
    static let plugins = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../plugins").standardized.path
    static let jsonDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../examples/plugins/json-dir").standardized.path

    func pluginCheck(_ arguments: [String]) throws -> (status: Int32, lines: [String], errors: String) {
        let result = try ChildProcess.run(FeeddBinaries.feedd, ["plugin", "check"] + arguments, environment: ["PATH": "/usr/bin:/bin"])
        return (result.status, result.output.split(separator: "\n").map(String.init), result.errors)
    }

    @Test func a_conforming_plugin_passes_every_check_and_exits_zero() throws {
        let directory = try TemporaryDirectory()
        for number in 1...25 { try directory.write("docs/\(String(format: "%02d", number)).json", "{\"n\": \(number)}") }
        let result = try pluginCheck([Self.jsonDir, "--option", "directory=\(directory.path("docs"))", "--option", "page_size=10"])
        #expect(result.status == 0, "\(result.lines) \(result.errors)")
        #expect(result.lines.contains("ok   configure: answered ok"))
        #expect(result.lines.contains("ok   page 3: 5 items, the last page"))
        #expect(result.lines.contains("ok   page 3: came back the same when asked for again"))
        #expect(result.lines.contains("     stderr: serving \(directory.path("docs")) for feed plugin-check"), "the plugin's stderr is shown")
        #expect(result.lines.last == "\(Self.jsonDir) follows the exec protocol")
        #expect(!result.lines.contains { $0.hasPrefix("FAIL") })
    }

    @Test func a_plugin_that_writes_garbage_fails_at_that_page() throws {
        let directory = try TemporaryDirectory()
        let result = try pluginCheck([
            "\(Self.plugins)/scripted-plugin", "--option", "fail_page=2", "--option", "fail_how=garbage",
            "--option", "once=\(directory.path("once"))",
        ])
        #expect(result.status == 1)
        #expect(result.lines.contains("ok   page 1: 20 items, more follow (next token \"after-1\")"))
        #expect(result.lines.contains {
            $0 == "FAIL page 2: the fetch failed: plugin \(Self.plugins)/scripted-plugin wrote a line that is not a JSON object: this is not json"
        }, "\(result.lines)")
        #expect(result.lines.last == "\(Self.plugins)/scripted-plugin does not follow the exec protocol (above)")
    }

    @Test func a_plugin_that_repeats_ids_is_told_they_must_be_unique() throws {
        let directory = try TemporaryDirectory()
        let plugin = try directory.write("same-ids", """
            #!/usr/bin/env python3
            import json, sys
            for line in sys.stdin:
                request = json.loads(line)
                if request["op"] == "configure":
                    print(json.dumps({"ok": True}), flush=True)
                else:
                    page = request["page"]
                    print(json.dumps({"items": [{"id": "a", "data": page}], "next": None if page == 3 else str(page)}), flush=True)
            """)
        chmod(plugin, 0o755)
        let result = try pluginCheck([plugin])
        #expect(result.status == 1)
        #expect(result.lines.contains("FAIL page 2: id \"a\" was already given on page 1; ids must be unique across the pages"), "\(result.lines)")
    }

    /// A plugin claiming its pages come back the same, whose pages do not, learns how to say so.
    @Test func a_plugin_whose_pages_change_is_told_about_reproduces_pages() throws {
        let directory = try TemporaryDirectory()
        let result = try pluginCheck([
            "\(Self.plugins)/unrepeatable-plugin", "--option", "reproduces=true", "--option", "pages=2",
            "--option", "counter=\(directory.path("counter"))", "--option", "log=\(directory.path("log"))",
        ])
        #expect(result.status == 1)
        #expect(result.lines.contains("FAIL page 1: came back different when asked for again with the same token"), "\(result.lines)")
        #expect(result.lines.contains { $0.contains("{\"ok\":true,\"reproduces_pages\":false}") })
        let honest = try pluginCheck([
            "\(Self.plugins)/unrepeatable-plugin", "--option", "pages=2",
            "--option", "counter=\(directory.path("counter2"))", "--option", "log=\(directory.path("log2"))",
        ])
        #expect(honest.status == 0, "\(honest.lines)")
    }

    @Test func a_plugin_refusing_its_options_fails_at_configure() throws {
        let result = try pluginCheck([Self.jsonDir])
        #expect(result.status == 1)
        #expect(result.lines.contains {
            $0 == "FAIL configure: plugin \(Self.jsonDir) refused its configuration: directory must name a directory, got None"
        }, "\(result.lines)")
    }

    @Test func a_program_that_cannot_run_or_a_bad_command_line_is_said_plainly() throws {
        let missing = try pluginCheck(["/nonexistent/plugin"])
        #expect(missing.status == 1)
        #expect(missing.errors == "feedd: cannot check /nonexistent/plugin: command: \"/nonexistent/plugin\" is not an executable file\n")
        let usage = try pluginCheck([])
        #expect(usage.status == 2)
        #expect(usage.errors.hasPrefix("feedd: plugin check needs the PROGRAM to check\n"))
        let option = try pluginCheck([Self.jsonDir, "--option", "directory"])
        #expect(option.status == 2)
        #expect(option.errors.hasPrefix("feedd: --option needs KEY=VALUE, got \"directory\"\n"))
    }
}
