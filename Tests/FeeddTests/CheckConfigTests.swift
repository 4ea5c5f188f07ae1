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
        let (result, path) = try run(config, dropIns: dropIns)
        return (Outcome(status: result.status, output: result.output + result.errors), path)
    }

    func run(_ config: String, dropIns: [String: String] = [:]) throws -> (result: (status: Int32, output: String, errors: String), path: String) {
        let directory = try TemporaryDirectory()
        let path = try directory.write("feedd.toml", config)
        for (name, text) in dropIns { try directory.write("feedd.d/\(name)", text) }
        return (try ChildProcess.run(FeeddBinaries.feedd, ["check-config", "--config", path]), path)
    }

    @Test func a_valid_config_prints_nothing_and_exits_zero() throws {
        let (outcome, _) = try checkConfig("""
            [daemon]
            prefetch = 3
            log_level = "debug"
            socket_mode = "0600"

            [feeds.notes]
            source = "file"
            path = "/etc/passwd"
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
        #expect(outcome.output.contains("\(path):2:1: feeds.users.source: unknown source \"randomuzer\"; did you mean \"randomuser\"? (known: "))
    }

    @Test func an_unknown_adapter_key_names_the_feed_and_the_key() throws {
        let (outcome, path) = try checkConfig("""
            [feeds.notes]
            source = "file"
            path = "/tmp/notes"
              pagesize = 5
            """)
        #expect(outcome.status == 2)
        #expect(outcome.output == "\(path):4:3: feeds.notes.pagesize: unknown key for source \"file\"; did you mean \"page_size\"?\n")
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

    /// Issue 28: one run lists every mistake, several in one feed, with the closest name for a typo.
    @Test func a_file_with_five_mistakes_reports_five() throws {
        let ((status, output, errors), path) = try run("""
            [daemon]
            max_clinets = 10

            [feeds.notes]
            source = "file"
            path = "notes.ndjson"
            page_size = 0
            timout = "5s"

            [feeds.users]
            source = "randomuzer"
            """)
        #expect(status == 2)
        #expect(errors == "")
        #expect(output.split(separator: "\n").map(String.init) == [
            "\(path):2:1: daemon.max_clinets: unknown key; did you mean \"max_clients\"?",
            "\(path):6:1: feeds.notes.path: must be an absolute path, got \"notes.ndjson\"",
            "\(path):7:1: feeds.notes.page_size: must be from 1 to 1000000, got 0",
            "\(path):8:1: feeds.notes.timout: unknown key for source \"file\"; did you mean \"timeout\"?",
            "\(path):11:1: feeds.users.source: unknown source \"randomuzer\"; did you mean \"randomuser\"? (known: exec, file, http, merge, randomuser, rss, s3)",
        ])
    }

    @Test func mistakes_in_every_file_are_reported_in_one_run() throws {
        let ((status, output, _), path) = try run(
            "[feeds.a]\nsource = \"file\"\npath = \"/tmp/a\"\nfollow = 1\n",
            dropIns: ["10-b.toml": "[feeds.b]\nsource = \"file\"\n", "20-c.toml": "[deamon]\nprefetch = 1\n"])
        #expect(status == 2)
        let directory = (path as NSString).deletingLastPathComponent + "/feedd.d"
        #expect(output.split(separator: "\n").map(String.init) == [
            "\(path):4:1: feeds.a.follow: expected a boolean, got an integer",
            "\(directory)/10-b.toml:1:8: feeds.b.path: is required",
            "\(directory)/20-c.toml:1:2: deamon: unknown table (expected [daemon], [cluster], [http] or [feeds.NAME]); did you mean \"daemon\"?",
        ])
    }

    /// A config that is valid but names paths that cannot work yet passes, with a warning on stderr.
    @Test func a_missing_file_and_metrics_directory_are_warnings_not_errors() throws {
        let ((status, output, errors), path) = try run("""
            [daemon]
            metrics_file = "/nonexistent-feedd/metrics/feedd.prom"

            [feeds.notes]
            source = "file"
            path = "/nonexistent-feedd/notes.ndjson"
            """)
        #expect(status == 0)
        #expect(output == "")
        #expect(errors.split(separator: "\n").map(String.init) == [
            "\(path):2:1: warning: daemon.metrics_file: the directory /nonexistent-feedd/metrics does not exist, so /nonexistent-feedd/metrics/feedd.prom cannot be written",
            "\(path):6:1: warning: feeds.notes.path: /nonexistent-feedd/notes.ndjson does not exist (yet)",
        ])
    }
}
