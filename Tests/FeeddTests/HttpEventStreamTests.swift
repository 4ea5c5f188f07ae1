import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// The feeds as Server-Sent Events (SPEC §11), read with Python's standard library.
@Suite struct HttpEventStreamTests {
    /// What every script here starts with: `stream(path, headers)` opens an event stream, and
    /// `events(response)` yields its events as `(event, id, data)`, parsed as an EventSource would.
    static let client = #"""
        import http.client, json, sys, time, urllib.parse, urllib.request
        BASE = urllib.parse.urlparse(sys.argv[1])
        def stream(path, headers=None):
            connection = http.client.HTTPConnection(BASE.hostname, BASE.port, timeout=15)
            connection.request("GET", path, headers=dict({"Accept": "text/event-stream"}, **(headers or {})))
            response = connection.getresponse()
            assert response.status == 200, (response.status, response.read())
            assert response.getheader("Content-Type").startswith("text/event-stream")
            return connection, response
        def events(response):
            event, id, data = "message", None, []
            while True:
                line = response.readline()
                if not line:
                    return
                line = line.decode().rstrip("\r\n")
                if line == "":
                    if data:
                        yield event, id, json.loads("\n".join(data))
                    event, data = "message", []
                elif line.startswith(":"):
                    continue
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "event": event = value
                    elif field == "id": id = value
                    elif field == "data": data.append(value)
        def post(path):
            with urllib.request.urlopen(urllib.request.Request(sys.argv[1] + path, method="POST"), timeout=10) as reply:
                return json.load(reply)
        def settled(measure, within):
            # measure() once it has stopped changing (and is not 0), or after `within` seconds.
            last, deadline = measure(), time.monotonic() + within
            while time.monotonic() < deadline:
                time.sleep(0.3)
                now = measure()
                if now == last and now > 0:
                    break
                last = now
            return last

        """#

    @Test func a_dropped_stream_resumes_from_its_last_event_id_with_no_gap_and_no_duplicate() throws {
        let world = try HTTPWorld(lines: 30, pageSize: 1)
        let result = try world.python(Self.client + """
            seen, ids = [], []
            connection, response = stream("/v1/feeds/numbers/events")
            for event, id, data in events(response):
                if event == "page":
                    seen.append(data["page"]); ids.append(id)
                if len(seen) == 7:
                    break
            connection.close()  # dropped mid-stream, as a network would
            connection, response = stream("/v1/feeds/numbers/events", {"Last-Event-ID": ids[-1]})
            for event, id, data in events(response):
                if event == "page":
                    seen.append(data["page"]); ids.append(id)
                if event == "end":
                    ids.append(id)
                    break
            print(json.dumps({"pages": seen, "ids": ids}))
            """)
        #expect(result["pages"] == .array((1...30).map { .integer(Int64($0)) }))
        #expect(result["ids"]?.arrayValue?.first == "1:1" && result["ids"]?.arrayValue?.last == "1:30", "id is GENERATION:PAGE; end's is the last page")
    }

    @Test func resuming_from_a_generation_that_is_gone_starts_the_current_one() throws {
        let world = try HTTPWorld(lines: 30, pageSize: 1)
        let result = try world.python(Self.client + """
            post("/v1/feeds/numbers/refresh")
            connection, response = stream("/v1/feeds/numbers/events", {"Last-Event-ID": "1:12"})
            got = []
            for event, id, data in events(response):
                got.append([event, id])
                if len(got) == 3:
                    break
            print(json.dumps(got))
            """)
        #expect(result == [["refreshed", "2:0"], ["page", "2:1"], ["page", "2:2"]])
    }

    @Test func a_refresh_reaches_an_open_stream_as_an_event() throws {
        let world = try HTTPWorld(lines: 5, pageSize: 1)
        let result = try world.python(Self.client + """
            connection, response = stream("/v1/feeds/numbers/events?after=3")
            got = []
            for event, id, data in events(response):
                got.append([event, id])
                if event == "end" and len(got) == 3:
                    post("/v1/feeds/numbers/refresh")
                if len(got) == 5:
                    break
            print(json.dumps(got))
            """)
        #expect(result == [["page", "1:4"], ["page", "1:5"], ["end", "1:5"], ["refreshed", "2:0"], ["page", "2:1"]])
    }

    @Test func a_bad_last_event_id_is_a_bad_request() throws {
        let world = try HTTPWorld()
        let reply = try world.curl("/v1/feeds/numbers/events", ["-H", "Last-Event-ID: 3"])
        #expect(reply.status == 400 && reply.json?["message"]?.stringValue?.contains("GENERATION:PAGE") == true)
    }

    @Test func a_followed_feed_streams_pages_appended_later() throws {
        let world = try HTTPWorld(lines: 2, pageSize: 1, feedOptions: "follow = true")
        let path = world.directory.path("numbers.ndjson")
        let result = try world.python(Self.client + """
            connection, response = stream("/v1/feeds/numbers/events")
            got = []
            for event, id, data in events(response):
                if event == "page":
                    got.append(data["items"][0]["data"]["n"])
                if len(got) == 2:
                    with open(sys.argv[2], "a") as file:
                        file.write('{"n":3}\\n')
                if len(got) == 3:
                    break
            print(json.dumps(got))
            """, [path])
        #expect(result == [1, 2, 3])
    }

    @Test func a_reader_that_stops_reading_stops_advancing_costs_little_and_is_let_go() throws {
        // 400 pages of about 20 KB: far more than the socket buffers and the stream's window hold.
        let directory = try TemporaryDirectory()
        let pad = String(repeating: "x", count: 2000)
        try directory.write("numbers.ndjson", (1...4000).map { #"{"n":\#($0),"pad":"\#(pad)"}"# }.joined(separator: "\n") + "\n")
        let world = try HTTPWorld(pageSize: 10, daemonOptions: #"stall_timeout = "4s""#, directory: directory)
        let memoryBefore = try world.daemon.memory("VmRSS")
        let result = try world.python(Self.client + """
            import socket
            stuck = socket.socket()
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stuck.connect((BASE.hostname, BASE.port))
            stuck.sendall(b"GET /v1/feeds/numbers/events HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            def delivered():
                with urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=10) as reply:
                    for line in reply.read().decode().splitlines():
                        if line.startswith('feedd_feed_pages_delivered_total{feed="numbers"}'):
                            return int(line.split()[-1])
            # Until the stream has filled what it may (a moment; longer for a daemon under the
            # thread sanitizer).
            first = settled(delivered, within=3)
            time.sleep(1.0)
            second = delivered()
            started = time.monotonic()
            with urllib.request.urlopen(sys.argv[1] + "/v1/feeds/numbers/pages?after=100", timeout=10) as reply:
                other = [page["page"] for page in json.load(reply)["pages"]]
            other_ms = int((time.monotonic() - started) * 1000)
            # It never reads, and after stall_timeout the daemon hangs up: the rest of what was
            # sent is there to read, then the end.
            time.sleep(5.0)
            stuck.settimeout(5)
            total, closed = 0, False
            try:
                while True:
                    chunk = stuck.recv(1 << 16)
                    if not chunk:
                        closed = True
                        break
                    total += len(chunk)
            except ConnectionResetError:
                closed = True
            print(json.dumps({"first": first, "second": second, "other": other, "other_ms": other_ms, "closed": closed, "bytes": total}))
            """)
        let first = result["first"]?.integerValue ?? -1
        // What the buffers hold (the kernel's 64 KiB, libmicrohttpd's chunk, the window of 4
        // pages) is a dozen of these pages, however long it stays: of 400.
        let second = result["second"]?.integerValue ?? -1
        #expect(first > 0 && second < 20, "the stream took a few pages, then stopped advancing: \(result.jsonText)")
        // Far less than stall_timeout: nobody waits for the stuck client to be let go.
        #expect(result["other"] == [101] && (result["other_ms"]?.integerValue ?? 9999) < 2000, "others are served meanwhile")
        #expect(result["closed"] == true, "stall_timeout ends the connection")
        #expect((result["bytes"]?.integerValue ?? 0) < 4_000_000, "what was sent stayed small: \(result.jsonText)")
        if !Sanitizer.isActive {
            #expect(try world.daemon.memory("VmRSS") - memoryBefore < 64 * 1024, "kB")
        }
    }

    /// HTTP/1.0, as nginx proxies by default, unchunked and written from libmicrohttpd's block of
    /// the response; HTTP/1.1, as browsers ask, chunked, and written from the connection's buffer.
    @Test(arguments: ["HTTP/1.0", "HTTP/1.1"])
    func a_unix_socket_stream_that_stops_reading_fills_the_default_send_buffer_and_no_more(version: String) throws {
        // A Unix socket's send buffer is all that bounds what its peer has not read. Fixed at
        // the TCP connections' 64 KiB (128 KiB as the kernel counts, its overhead included),
        // it would hold under 128 KiB; left at the socket front's default
        // (net.core.wmem_default, 208 KiB on Linux), it holds more, and still a bounded amount.
        let directory = try TemporaryDirectory()
        let pad = String(repeating: "x", count: 2000)
        try directory.write("numbers.ndjson", (1...4000).map { #"{"n":\#($0),"pad":"\#(pad)"}"# }.joined(separator: "\n") + "\n")
        let socketPath = directory.path("http.sock")
        let world = try HTTPWorld(pageSize: 10, unixSocket: socketPath, directory: directory)
        try world.daemon.log.waitForLine(containing: "listening on \(socketPath)")
        let result = try world.python(Self.client + """
            import array, fcntl, socket, termios
            stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stuck.connect(sys.argv[2])
            stuck.sendall(b"GET /v1/feeds/numbers/events " + sys.argv[3].encode() + b"\\r\\nHost: x\\r\\n\\r\\n")
            def queued():
                count = array.array("i", [0])
                fcntl.ioctl(stuck, termios.FIONREAD, count)
                return count[0]
            # Once the bytes waiting for the client have stopped growing.
            queued = settled(queued, within=10)
            with open("/proc/sys/net/core/wmem_default") as file:
                default = int(file.read())
            print(json.dumps({"queued": queued, "default": default}))
            """, [socketPath, version])
        let queued = result["queued"]?.integerValue ?? -1
        let sendBufferDefault = try #require(result["default"]?.integerValue)
        try #require(sendBufferDefault >= 200_000, "this test assumes Linux's default socket send buffer (212992 bytes)")
        #expect(queued > 128 * 1024, "the stream's connection keeps the socket's default send buffer: \(result.jsonText)")
        #expect(queued < sendBufferDefault + 64 * 1024, "and no more: \(result.jsonText)")
    }

    @Test func a_thousand_streams_each_get_every_page_in_order() throws {
        let world = try HTTPWorld(lines: 50, pageSize: 10)
        let result = try world.python(Self.client + """
            import resource, selectors, socket
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
            selector = selectors.DefaultSelector()
            received = {}
            for index in range(1000):
                connection = socket.create_connection((BASE.hostname, BASE.port))
                # HTTP/1.0: the events come without chunked framing, until the client hangs up.
                connection.sendall(b"GET /v1/feeds/numbers/events HTTP/1.0\\r\\n\\r\\n")
                connection.setblocking(False)
                selector.register(connection, selectors.EVENT_READ, index)
                received[index] = b""
            done, deadline = set(), time.monotonic() + 45
            while len(done) < 1000 and time.monotonic() < deadline:
                for key, _ in selector.select(timeout=1):
                    try:
                        chunk = key.fileobj.recv(1 << 16)
                    except BlockingIOError:
                        continue
                    received[key.data] += chunk
                    if not chunk or b"event: end" in received[key.data]:
                        selector.unregister(key.fileobj)
                        key.fileobj.close()
                        done.add(key.data)
            orders = set()
            for body in received.values():
                ids = [line[4:] for line in body.decode().split("\\n") if line.startswith("id: ")]
                orders.add(",".join(ids))
            print(json.dumps({"done": len(done), "orders": sorted(orders)}))
            """, timeout: 90)
        #expect(result["done"] == 1000)
        #expect(result["orders"] == ["1:1,1:2,1:3,1:4,1:5,1:5"], "every stream: pages 1 to 5, then end")
    }
}
