import Foundation
import Testing
import TestSupport

/// The `[http]` table (SPEC §11) as `feedd check-config` sees it: every problem at its key.
@Suite struct HttpConfigTests {
    func checkConfig(_ http: String, in directory: TemporaryDirectory? = nil) throws -> (status: Int32, output: String, path: String) {
        let directory = try directory ?? TemporaryDirectory()
        let path = try directory.write("feedd.toml", "[daemon]\nprefetch = 1\n\n[http]\n\(http)\n")
        let result = try ChildProcess.run(FeeddBinaries.feedd, ["check-config", "--config", path])
        return (result.status, result.output + result.errors, path)
    }

    @Test func a_complete_http_table_is_valid() throws {
        let directory = try TemporaryDirectory()
        try directory.write("tokens/users.token", "abc-123\n")
        try directory.write("tokens/README", "not a token")
        try directory.write("tls/cert.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        try directory.write("tls/key.pem", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")
        let result = try checkConfig("""
            listen = ["127.0.0.1:8080", "[::1]:8080", "/run/feedd/http.sock"]
            tokens_dir = "\(directory.path("tokens"))"
            cors_origins = ["https://app.example.com", "http://localhost:3000"]
            tls_cert = "\(directory.path("tls/cert.pem"))"
            tls_key = "\(directory.path("tls/key.pem"))"
            max_clients = 500
            reading_linger = "2m"
            """, in: directory)
        #expect(result.status == 0 && result.output == "")
    }

    @Test func each_bad_key_is_reported_where_it_is_written() throws {
        let result = try checkConfig("""
            listen = ["8080", "localhost"]
            cors_origins = ["https://app.example.com/"]
            tls_cert = "/nonexistent/cert.pem"
            max_clients = 0
            reading_linger = "0s"
            colour = "blue"
            """)
        #expect(result.status == 2)
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 6, "\(result.output)")
        #expect(lines.contains { $0.hasPrefix("\(result.path):5:1: http.listen:") && $0.contains("\"8080\"") })
        #expect(lines.contains { $0.hasPrefix("\(result.path):6:1: http.cors_origins:") })
        #expect(lines.contains { $0.hasPrefix("\(result.path):7:1: http.tls_cert: needs tls_key too") })
        #expect(lines.contains { $0.hasPrefix("\(result.path):8:1: http.max_clients:") })
        #expect(lines.contains { $0.hasPrefix("\(result.path):9:1: http.reading_linger:") })
        #expect(lines.contains { $0.hasPrefix("\(result.path):10:1: http.colour: unknown key") })
    }

    @Test func a_token_file_that_cannot_be_used_is_a_problem_that_does_not_show_the_token() throws {
        let directory = try TemporaryDirectory()
        try directory.write("tokens/users.token", "has spaces inside\n")
        try directory.write("tokens/empty.token", "\n")
        var result = try checkConfig(#"tokens_dir = "\#(directory.path("tokens"))""#, in: directory)
        #expect(result.status == 2)
        #expect(result.output.contains("http.tokens_dir:"))
        #expect(!result.output.contains("has spaces"), "a token never appears in a message")
        result = try checkConfig(#"tokens_dir = "\#(directory.path("missing"))""#, in: directory)
        #expect(result.status == 2 && result.output.contains("cannot list"))
    }

    @Test func a_tls_file_that_is_not_pem_is_a_problem() throws {
        let directory = try TemporaryDirectory()
        try directory.write("cert.pem", "hello")
        try directory.write("key.pem", "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n")
        let result = try checkConfig(#"tls_cert = "\#(directory.path("cert.pem"))"\#ntls_key = "\#(directory.path("key.pem"))""#, in: directory)
        #expect(result.status == 2 && result.output.contains("http.tls_cert:") && result.output.contains("not a PEM file"))
    }
}
