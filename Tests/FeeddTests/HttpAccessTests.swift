import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// Who may use the HTTP front and how much (SPEC §11): bearer tokens, CORS, `max_clients`, TLS.
@Suite struct HttpAccessTests {
    /// A daemon whose feed `numbers` needs `token`, beside an open feed `open`.
    static func protectedWorld(token: String = "s3cret-token") throws -> HTTPWorld {
        let directory = try TemporaryDirectory()
        try directory.write("tokens/numbers.token", token + "\n")
        try directory.write("open.ndjson", "1\n2\n3\n")
        return try HTTPWorld(
            http: #"tokens_dir = "\#(directory.path("tokens"))""#,
            moreTables: "[feeds.open]\nsource = \"file\"\npath = \"\(directory.path("open.ndjson"))\"\npage_size = 1\n", directory: directory)
    }

    @Test func a_feed_with_a_token_refuses_a_request_without_it_or_with_another() throws {
        let world = try Self.protectedWorld()
        for path in ["/v1/feeds/numbers", "/v1/feeds/numbers/pages", "/v1/feeds/numbers/events"] {
            let missing = try world.curl(path)
            #expect(missing.status == 401 && missing.json?["code"] == "unauthorized", "\(path)")
            #expect(missing.headers["www-authenticate"] == #"Bearer realm="feedd""#)
        }
        let wrong = try world.curl("/v1/feeds/numbers/pages", ["-H", "Authorization: Bearer s3cret-tokeN"])
        #expect(wrong.status == 401 && wrong.headers["www-authenticate"]?.contains("invalid_token") == true)
        let prefix = try world.curl("/v1/feeds/numbers/pages", ["-H", "Authorization: Bearer s3cret"])
        #expect(prefix.status == 401)
        let basic = try world.curl("/v1/feeds/numbers/pages", ["-u", "user:s3cret-token"])
        #expect(basic.status == 401)
        let refresh = try world.curl("/v1/feeds/numbers/refresh", ["-X", "POST"])
        #expect(refresh.status == 401)
        let right = try world.curl("/v1/feeds/numbers/pages", ["-H", "Authorization: bearer s3cret-token"])
        #expect(right.status == 200 && right.pageNumbers == [1])
        #expect(try world.curl("/v1/feeds/open/pages").status == 200, "a feed without a token is open")
        #expect(!world.daemon.log.text.contains("s3cret"), "a token is never logged")
    }

    @Test func the_feed_list_shows_a_protected_feed_only_to_its_token() throws {
        let world = try Self.protectedWorld()
        #expect(try world.curl("/v1/feeds").json == ["feeds": ["open"]])
        #expect(try world.curl("/v1/feeds", ["-H", "Authorization: Bearer s3cret-token"]).json == ["feeds": ["numbers", "open"]])
    }

    @Test func a_reload_reads_the_tokens_again() throws {
        let world = try Self.protectedWorld(token: "first")
        #expect(try world.curl("/v1/feeds/numbers", ["-H", "Authorization: Bearer first"]).status == 200)
        try world.directory.write("tokens/numbers.token", "second\n")
        world.daemon.send(signal: SIGHUP)
        try world.daemon.log.waitForLine(containing: "configuration reloaded")
        #expect(try world.curl("/v1/feeds/numbers", ["-H", "Authorization: Bearer first"]).status == 401)
        #expect(try world.curl("/v1/feeds/numbers", ["-H", "Authorization: Bearer second"]).status == 200)
    }

    @Test func metrics_need_the_metrics_token_when_there_is_one() throws {
        let directory = try TemporaryDirectory()
        try directory.write("tokens/_metrics.token", "scrape\n")
        let world = try HTTPWorld(http: #"tokens_dir = "\#(directory.path("tokens"))""#, directory: directory)
        #expect(try world.curl("/metrics").status == 401)
        #expect(try world.curl("/metrics", ["-H", "Authorization: Bearer scrape"]).status == 200)
        #expect(try world.curl("/v1/feeds/numbers/pages").status == 200)
    }

    @Test func a_preflight_from_a_listed_origin_is_allowed_and_others_get_nothing() throws {
        let world = try HTTPWorld(http: #"cors_origins = ["https://app.example.com"]"#)
        let preflight = try world.curl("/v1/feeds/numbers/pages", [
            "-X", "OPTIONS", "-H", "Origin: https://app.example.com", "-H", "Access-Control-Request-Method: GET",
            "-H", "Access-Control-Request-Headers: authorization",
        ])
        #expect(preflight.status == 204)
        #expect(preflight.headers["access-control-allow-origin"] == "https://app.example.com")
        #expect(preflight.headers["access-control-allow-methods"]?.contains("GET") == true)
        #expect(preflight.headers["access-control-allow-headers"]?.lowercased().contains("authorization") == true)
        #expect(preflight.headers["vary"] == "Origin")
        let get = try world.curl("/v1/feeds/numbers/pages", ["-H", "Origin: https://app.example.com"])
        #expect(get.headers["access-control-allow-origin"] == "https://app.example.com")
        #expect(get.headers["access-control-expose-headers"]?.contains("ETag") == true)
        let error = try world.curl("/v1/feeds/nope", ["-H", "Origin: https://app.example.com"])
        #expect(error.status == 404 && error.headers["access-control-allow-origin"] != nil, "errors are readable to the page too")
        let stranger = try world.curl("/v1/feeds/numbers/pages", [
            "-X", "OPTIONS", "-H", "Origin: https://evil.example", "-H", "Access-Control-Request-Method: GET",
        ])
        #expect(stranger.headers["access-control-allow-origin"] == nil)
        #expect(try world.curl("/v1/feeds/numbers/pages", ["-H", "Origin: https://evil.example"]).headers["access-control-allow-origin"] == nil)
    }

    @Test func past_max_clients_a_request_is_answered_429() throws {
        let world = try HTTPWorld(http: "max_clients = 3")
        let result = try world.python("""
            import json, socket, sys, urllib.parse, urllib.request, urllib.error
            url = urllib.parse.urlparse(sys.argv[1])
            held = []
            for _ in range(3):
                connection = socket.create_connection((url.hostname, url.port), timeout=10)
                connection.sendall(b"GET /v1/feeds/numbers/events HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
                assert connection.recv(100).startswith(b"HTTP/1.1 200")
                held.append(connection)
            try:
                urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=10)
                status, body = 200, {}
            except urllib.error.HTTPError as error:
                status, body = error.code, json.load(error)
            for connection in held: connection.close()
            print(json.dumps({"status": status, "body": body}))
            """)
        #expect(result["status"] == 429 && result["body"]?["code"] == "too_many_clients")
        // Once they leave, there is room again.
        var status = 0
        for _ in 0..<50 where status != 200 {
            status = try world.curl("/healthz").status
            if status != 200 { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(status == 200)
    }

    @Test func tls_serves_with_the_configured_certificate() throws {
        let directory = try TemporaryDirectory()
        let made = try ChildProcess.run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", directory.path("key.pem"), "-out", directory.path("cert.pem"),
        ])
        try #require(made.status == 0, "openssl: \(made.errors)")
        let world = try HTTPWorld(
            http: #"tls_cert = "\#(directory.path("cert.pem"))"\#ntls_key = "\#(directory.path("key.pem"))""#, directory: directory)
        try world.daemon.log.waitForLine(containing: "HTTPS listening")
        let reply = try HTTPReply.curl(["--cacert", directory.path("cert.pem"), "https://127.0.0.1:\(world.port)/v1/feeds/numbers/pages?count=2"])
        #expect(reply.status == 200 && reply.pageNumbers == [1, 2])
        let plain = try ChildProcess.run("/usr/bin/curl", ["-s", "--max-time", "5", "http://127.0.0.1:\(world.port)/healthz"])
        #expect(plain.output.isEmpty, "no plain HTTP on a TLS listener")
    }
}
