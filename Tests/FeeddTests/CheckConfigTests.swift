import Foundation
import Testing
import TestSupport

/// `feedd check-config` (SPEC §2): every problem as FILE:LINE:COL: message, exit 2; silence and 0 when valid.
@Suite struct CheckConfigTests {
    struct Outcome {
        let status: Int32
        let output: String
    }

    func checkConfig(_ config: String, dropIns: [String: String] = [:]) throws -> (Outcome, String) {
        let directory = try TemporaryDirectory()
        let path = try directory.write("feedd.toml", config)
        for (name, text) in dropIns { try directory.write("feedd.d/\(name)", text) }
        let result = try ChildProcess.run(FeeddBinaries.feedd, ["check-config", "--config", path])
        return (Outcome(status: result.status, output: result.output + result.errors), path)
    }

    @Test func a_valid_config_prints_nothing_and_exits_zero() throws {
        let (outcome, _) = try checkConfig("""
            [daemon]
            prefetch = 3
            log_level = "debug"
            socket_mode = "0600"

            [feeds.notes]
            source = "file"
            path = "/var/lib/feedd/notes.ndjson"
            page_size = 5
            follow = true
            timeout = "2s"
            cache_pages = 10
            """)
        #expect(outcome.status == 0)
        #expect(outcome.output == "")
    }

    @Test func a_syntax_error_is_reported_with_line_and_column() throws {
        let (outcome, path) = try checkConfig("[daemon]\nprefetch = 2\n\n[feeds.a\nsource = \"file\"\n")
        #expect(outcome.status == 2)
        #expect(outcome.output.hasPrefix("\(path):4:"), "\(outcome.output)")
    }

    @Test func an_unknown_source_names_the_feed_and_the_known_sources() throws {
        let (outcome, path) = try checkConfig("[feeds.users]\nsource = \"randomuzer\"\n")
        #expect(outcome.status == 2)
        #expect(outcome.output.contains("\(path):2:1: feeds.users.source: unknown source \"randomuzer\" (known: "))
    }

    @Test func an_unknown_adapter_key_names_the_feed_and_the_key() throws {
        let (outcome, path) = try checkConfig("""
            [feeds.notes]
            source = "file"
            path = "/tmp/notes"
              pagesize = 5
            """)
        #expect(outcome.status == 2)
        #expect(outcome.output == "\(path):4:3: feeds.notes.pagesize: unknown key for source \"file\"\n")
    }

    @Test func every_problem_is_listed() throws {
        let (outcome, path) = try checkConfig("""
            [daemon]
            prefetch = "lots"
            colour = "blue"

            [feeds.notes]
            source = "file"

            [feeds.Bad]
            source = "file"

            [feeds.slow]
            source = "file"
            path = "/tmp/x"
            timeout = "soon"
            """)
        #expect(outcome.status == 2)
        let lines = outcome.output.split(separator: "\n").map(String.init)
        #expect(lines.contains("\(path):2:1: daemon.prefetch: expected an integer, got a string"))
        #expect(lines.contains("\(path):3:1: daemon.colour: unknown key"))
        #expect(lines.contains("\(path):5:8: feeds.notes.path: is required"))
        #expect(lines.contains { $0.hasPrefix("\(path):8:") && $0.contains("feeds.Bad: a feed name must match") })
        #expect(lines.contains { $0.hasPrefix("\(path):14:1: feeds.slow.timeout: \"soon\" is not a duration") })
    }

    @Test func a_feed_defined_twice_names_both_files() throws {
        let (outcome, path) = try checkConfig(
            "[feeds.notes]\nsource = \"file\"\npath = \"/tmp/a\"\n",
            dropIns: ["10-more.toml": "\n[feeds.notes]\nsource = \"file\"\npath = \"/tmp/b\"\n"])
        #expect(outcome.status == 2)
        let dropIn = (path as NSString).deletingLastPathComponent + "/feedd.d/10-more.toml"
        #expect(outcome.output.contains("\(dropIn):2:8: feeds.notes: feed \"notes\" is defined twice, in \(path):1:8 and here"), "\(outcome.output)")
    }

    @Test func drop_ins_add_feeds_in_name_order() throws {
        let (outcome, _) = try checkConfig(
            "[daemon]\nprefetch = 1\n",
            dropIns: ["20-b.toml": "[feeds.b]\nsource = \"file\"\npath = \"/tmp/b\"\n", "10-a.toml": "[daemon]\nprefetch = 4\n"])
        #expect(outcome.status == 0, "\(outcome.output)")
    }
}
