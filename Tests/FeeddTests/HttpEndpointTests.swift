import FeedKit
import Foundation
import Testing
import TestSupport

/// The HTTP front's endpoints (SPEC §11), asked with curl.
@Suite struct HttpEndpointTests {
    @Test func the_feeds_their_status_and_the_health_check_answer() throws {
        let world = try HTTPWorld()
        let health = try world.curl("/healthz")
        #expect(health.status == 200 && health.json == ["status": "ok"])
        #expect(try world.curl("/v1/feeds").json == ["feeds": ["numbers"]])
        let status = try world.curl("/v1/feeds/numbers")
        #expect(status.status == 200)
        #expect(status.json?["name"] == "numbers" && status.json?["source"] == "file" && status.json?["state"] == "ok")
        #expect(status.json?["generation"] == 1)
    }

    @Test func pages_come_after_the_page_asked_for_and_end_with_the_feed() throws {
        let world = try HTTPWorld(lines: 95, pageSize: 10)
        let first = try world.curl("/v1/feeds/numbers/pages")
        #expect(first.status == 200 && first.headers["content-type"] == "application/json")
        #expect(first.json?["feed"] == "numbers" && first.json?["generation"] == 1 && first.json?["end"] == false)
        #expect(first.pageNumbers == [1], "count defaults to 1, after to 0")
        let page = first.json?["pages"]?.arrayValue?.first
        #expect(page?["type"] == "page" && page?["items"]?.arrayValue?.first == ["id": "1", "data": ["n": 1]], "each page is the object of a page line")
        #expect(try world.curl("/v1/feeds/numbers/pages?after=3&count=4").pageNumbers == [4, 5, 6, 7])
        let last = try world.curl("/v1/feeds/numbers/pages?after=8&count=5")
        #expect(last.pageNumbers == [9, 10] && last.json?["end"] == true)
        #expect(last.json?["pages"]?.arrayValue?.last?["last"] == true)
        let past = try world.curl("/v1/feeds/numbers/pages?after=10")
        #expect(past.pageNumbers == [] && past.json?["end"] == true)
    }

    @Test func a_page_not_fetched_yet_is_waited_for_without_holding_up_others() throws {
        let upstream = try LoopbackUpstream()
        upstream.setLatency(.milliseconds(1500))
        let world = try HTTPWorld(moreTables: """
            [feeds.users]
            source = "randomuser"
            url = "\(upstream.baseURL)/api/"
            results = 3
            seed = "s"
            prefetch = 0
            """)
        let timings = try world.python("""
            import json, sys, threading, time, urllib.request
            base = sys.argv[1]
            def pages(feed):
                with urllib.request.urlopen(f"{base}/v1/feeds/{feed}/pages", timeout=20) as reply:
                    return [page["page"] for page in json.load(reply)["pages"]]
            slow = {}
            def read_slow():
                started = time.monotonic()
                slow["pages"] = pages("users")
                slow["seconds"] = time.monotonic() - started
            thread = threading.Thread(target=read_slow)
            thread.start()
            time.sleep(0.3)
            started = time.monotonic()
            fast = pages("numbers")
            fast_seconds = time.monotonic() - started
            thread.join()
            print(json.dumps({"fast": fast, "fast_ms": int(fast_seconds * 1000), "slow": slow["pages"], "slow_ms": int(slow["seconds"] * 1000)}))
            """)
        #expect(timings["slow"] == [1] && timings["fast"] == [1])
        #expect((timings["slow_ms"]?.integerValue ?? 0) >= 1400, "the first page waited for the upstream")
        #expect((timings["fast_ms"]?.integerValue ?? 9999) < 500, "meanwhile another feed answered at once: \(timings.jsonText)")
    }

    @Test func a_bad_parameter_is_a_bad_request_that_names_it() throws {
        let world = try HTTPWorld()
        for (query, name) in [("count=101", "count"), ("count=0", "count"), ("after=-1", "after"), ("after=x", "after"), ("consumer=.hidden", "consumer")] {
            let reply = try world.curl("/v1/feeds/numbers/pages?\(query)")
            #expect(reply.status == 400, "\(query)")
            #expect(reply.json?["type"] == "error" && reply.json?["code"] == "bad_request")
            #expect(reply.json?["message"]?.stringValue?.contains("`\(name)`") == true, "\(query): \(reply.body)")
        }
    }

    @Test func errors_have_the_status_that_fits() throws {
        let world = try HTTPWorld()
        let unknownFeed = try world.curl("/v1/feeds/nope/pages")
        #expect(unknownFeed.status == 404 && unknownFeed.json?["code"] == "unknown_feed")
        let badName = try world.curl("/v1/feeds/No%20Such")
        #expect(badName.status == 404 && badName.json?["code"] == "unknown_feed")
        let nothing = try world.curl("/v2/feeds")
        #expect(nothing.status == 404 && nothing.json?["code"] == "not_found")
        let wrongMethod = try world.curl("/v1/feeds/numbers/refresh")
        #expect(wrongMethod.status == 405 && wrongMethod.headers["allow"] == "POST, OPTIONS")
        #expect(wrongMethod.json?["type"] == "error")
        let put = try world.curl("/v1/feeds/numbers", ["-X", "PUT", "-d", "{}"])
        #expect(put.status == 405)
        let badAck = try world.curl("/v1/feeds/numbers/ack", ["-d", #"{"consumer":"c1"}"#])
        #expect(badAck.status == 400 && badAck.json?["message"]?.stringValue?.contains("`page`") == true)
        let notJSON = try world.curl("/v1/feeds/numbers/ack", ["-d", "page=3"])
        #expect(notJSON.status == 400 && notJSON.json?["code"] == "bad_json")
    }

    @Test func a_target_header_or_body_over_max_line_bytes_is_413() throws {
        let world = try HTTPWorld(daemonOptions: "max_line_bytes = 1024")
        let longTarget = try world.curl("/v1/feeds/numbers/pages?pad=" + String(repeating: "a", count: 2000))
        #expect(longTarget.status == 413 && longTarget.json?["code"] == "line_too_long")
        let longHeader = try world.curl("/healthz", ["-H", "X-Pad: " + String(repeating: "b", count: 2000)])
        #expect(longHeader.status == 413 && longHeader.json?["code"] == "line_too_long")
        let longBody = try world.curl("/v1/feeds/numbers/ack", ["--data-binary", String(repeating: " ", count: 5000) + #"{"consumer":"c","page":1}"#])
        #expect(longBody.status == 413 && longBody.json?["code"] == "line_too_long")
        // A chunked body says no length up front: it is read, dropped past the limit, and refused.
        let chunked = try world.curl(
            "/v1/feeds/numbers/ack", ["-H", "Transfer-Encoding: chunked", "--data-binary", String(repeating: " ", count: 5000) + "{}"])
        #expect(chunked.status == 413)
        #expect(try world.curl("/healthz").status == 200, "and the daemon carries on")
    }

    @Test func clients_that_never_read_their_pages_share_them_and_cost_little() throws {
        let directory = try TemporaryDirectory()
        let pad = String(repeating: "y", count: 4000)
        try directory.write("numbers.ndjson", (1...500).map { #"{"n":\#($0),"pad":"\#(pad)"}"# }.joined(separator: "\n") + "\n")
        let world = try HTTPWorld(pageSize: 10, directory: directory)
        // The pages once, into the cache (slow under the thread sanitizer).
        #expect(try world.curl("/v1/feeds/numbers/pages?count=50", timeout: 90).pageNumbers.count == 50)
        let before = try world.daemon.memory("VmRSS")
        let result = try world.python("""
            import json, socket, sys, time, urllib.parse, urllib.request
            url = urllib.parse.urlparse(sys.argv[1])
            held = []
            for _ in range(100):
                connection = socket.socket()
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                connection.connect((url.hostname, url.port))
                connection.sendall(b"GET /v1/feeds/numbers/pages?count=50 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
                held.append(connection)
            time.sleep(1.0)
            with urllib.request.urlopen(sys.argv[1] + "/v1/feeds/numbers/pages?after=20", timeout=30) as reply:
                other = [page["page"] for page in json.load(reply)["pages"]]
            print(json.dumps({"other": other}))
            """)
        let after = try world.daemon.memory("VmRSS")
        #expect(result["other"] == [21], "others are served meanwhile")
        if !Sanitizer.isActive {
            // A copy of each 2 MB answer would be 200 MB.
            #expect(after - before < 40 * 1024, "VmRSS grew by \(after - before) kB")
        }
    }

    @Test func a_matching_etag_is_answered_304() throws {
        let world = try HTTPWorld()
        let first = try world.curl("/v1/feeds/numbers/pages?after=2&count=2")
        let tag = try #require(first.headers["etag"])
        let again = try world.curl("/v1/feeds/numbers/pages?after=2&count=2", ["-H", "If-None-Match: \(tag)"])
        #expect(again.status == 304 && again.body.isEmpty && again.headers["etag"] == tag)
        let other = try world.curl("/v1/feeds/numbers/pages?after=3&count=2", ["-H", "If-None-Match: \(tag)"])
        #expect(other.status == 200 && other.headers["etag"] != tag)
        // The same pages of a new generation are other pages.
        #expect(try world.curl("/v1/feeds/numbers/refresh", ["-X", "POST"]).json?["generation"] == 2)
        #expect(try world.curl("/v1/feeds/numbers/pages?after=2&count=2", ["-H", "If-None-Match: \(tag)"]).status == 200)
    }

    @Test func refresh_starts_a_new_generation() throws {
        let world = try HTTPWorld()
        #expect(try world.curl("/v1/feeds/numbers/pages?count=3").pageNumbers == [1, 2, 3])
        let refreshed = try world.curl("/v1/feeds/numbers/refresh", ["-X", "POST"])
        #expect(refreshed.status == 200 && refreshed.json == ["type": "refreshed", "feed": "numbers", "generation": 2])
        let page = try world.curl("/v1/feeds/numbers/pages")
        #expect(page.json?["generation"] == 2 && page.pageNumbers == [1])
    }

    @Test func metrics_are_openmetrics_text_with_the_http_clients_counted() throws {
        let world = try HTTPWorld()
        _ = try world.curl("/v1/feeds/numbers/pages?count=2")
        let metrics = try world.curl("/metrics")
        #expect(metrics.status == 200 && metrics.headers["content-type"]?.hasPrefix("application/openmetrics-text") == true)
        #expect(metrics.body.hasSuffix("# EOF\n"))
        #expect(metrics.body.contains(#"feedd_feed_pages_delivered_total{feed="numbers"} 2"#))
        let accepted = metrics.body.split(separator: "\n").first { $0.hasPrefix("feedd_client_connections_total ") }
        #expect(accepted.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 >= 2 } == true, "\(metrics.body)")
    }

    @Test func the_front_listens_on_a_unix_socket_too() throws {
        let directory = try TemporaryDirectory()
        let socket = directory.path("http.sock")
        let world = try HTTPWorld(unixSocket: socket, directory: directory)
        try world.daemon.log.waitForLine(containing: "listening on \(socket)")
        let reply = try HTTPReply.curl(["--unix-socket", socket, "http://feedd/v1/feeds/numbers/pages?count=2"])
        #expect(reply.status == 200 && reply.pageNumbers == [1, 2])
    }
}
