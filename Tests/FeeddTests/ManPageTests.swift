import FeedKit
import Foundation
import Testing
import TestSupport

/// The man pages are built from doc/man/*.scd with the key and command lists the binaries print
/// (doc/man/build, which debian/rules runs too), so they hold every key and command (issue 28).
@Suite struct ManPageTests {
    static let builder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../doc/man/build").standardized.path

    /// The rendered pages (roff), by name.
    static func build() throws -> [String: String] {
        let directory = try TemporaryDirectory()
        let result = try ChildProcess.run("/bin/sh", [builder, FeeddBinaries.directory, directory.path], environment: ["PATH": "/usr/bin:/bin"])
        guard result.status == 0 else { throw TestFailure("doc/man/build failed: \(result.errors)") }
        var pages: [String: String] = [:]
        for name in ["feedd.8", "feedctl.1", "feedd.toml.5"] {
            pages[name] = try String(contentsOfFile: directory.path(name), encoding: .utf8)
        }
        return pages
    }

    func jsonLines(_ program: String, _ arguments: [String]) throws -> [JSONValue] {
        let result = try ChildProcess.run("\(FeeddBinaries.directory)/\(program)", arguments)
        return try result.output.split(separator: "\n").map { try JSONValue(parsing: Array($0.utf8)) }
    }

    @Test func feedd_toml_holds_every_key_the_daemon_declares() throws {
        let page = try #require(try Self.build()["feedd.toml.5"])
        let keys = try jsonLines("feedd", ["config-keys", "--json"])
        #expect(keys.count > 50)
        for key in keys where key["name"] != "(any other key)" {
            let name = try #require(key["name"]?.stringValue)
            #expect(page.contains("\\fB\(name)\\fR ("), "\(key["heading"]?.stringValue ?? "") \(name) is missing")
        }
    }

    /// Keys the SPEC names, listed here by hand, so the page is checked against more than itself.
    @Test func feedd_toml_holds_the_keys_and_sources_of_the_spec() throws {
        let page = try #require(try Self.build()["feedd.toml.5"])
        let specKeys = [
            "socket", "state_dir", "prefetch", "max_clients", "max_line_bytes", "socket_mode", "socket_group", "allow_uids",
            "allow_groups", "log_level", "metrics_file", "source", "wrap", "poll", "timeout", "retry_max_delay", "cache_pages",
            "cache_bytes", "max_consumers", "metrics_consumers", "shared", "url", "results", "seed", "path", "page_size", "follow", "command", "feeds", "order", "field",
            "items", "id", "next", "headers", "bearer_token_file", "nats", "name", "replicas", "lease",
        ]
        for key in specKeys { #expect(page.contains("\\fB\(key)\\fR ("), "\(key)") }
        for source in ["file", "randomuser", "s3", "exec", "http", "rss", "merge"] {
            #expect(page.contains("[feeds.NAME] of the \(source) source"), "\(source)")
        }
        #expect(page.contains(".SS [cluster]"))
    }

    @Test func feedctl_holds_every_command() throws {
        let page = try #require(try Self.build()["feedctl.1"])
        let table = try #require(try jsonLines("feedctl", ["help", "--json"]).first)
        let names = (table["commands"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        #expect(Set(["status", "next", "follow", "refresh", "consumers", "lag", "ack", "forget", "metrics"]).isSubset(of: Set(names)))
        for name in names { #expect(page.contains("\n\\fB\(name)\\fR"), "\(name)") }
        for option in ["--socket", "--json", "--version", "--wait", "--force"] { #expect(page.contains("\\fB\(option)\\fR"), "\(option)") }
    }

    @Test func feedd_holds_every_command() throws {
        let page = try #require(try Self.build()["feedd.8"])
        for command in ["check-config", "state check", "state repair", "config-keys", "plugin check"] {
            #expect(page.contains("\\fB\(command)"), "\(command)")
        }
    }
}
