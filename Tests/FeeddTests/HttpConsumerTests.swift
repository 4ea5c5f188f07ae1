import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// Durable consumers over HTTP (SPEC §11): `pages?consumer=C` reads like `next`, acknowledging
/// what the consumer was given before; `POST …/ack` acknowledges explicitly.
@Suite struct HttpConsumerTests {
    static func pages(_ world: HTTPWorld, _ consumer: String, count: Int = 2, after: Int? = nil) throws -> [Int64] {
        let reply = try world.curl("/v1/feeds/numbers/pages?consumer=\(consumer)&count=\(count)" + (after.map { "&after=\($0)" } ?? ""))
        guard reply.status == 200 else { throw TestFailure("pages for \(consumer): \(reply.status) \(reply.body)") }
        return reply.pageNumbers
    }

    @Test func a_consumer_reads_on_and_each_request_acknowledges_the_one_before() throws {
        let directory = try TemporaryDirectory()
        do {
            let world = try HTTPWorld(pageSize: 1, directory: directory)
            #expect(try Self.pages(world, "c1") == [1, 2])
            #expect(try Self.pages(world, "c1") == [3, 4], "this request acknowledged 1 and 2")
            let consumers = try world.curl("/v1/feeds/numbers").json?["consumers"]?.arrayValue ?? []
            #expect(consumers.contains { $0["name"] == "c1" && $0["after"] == 2 })
            world.daemon.send(signal: SIGKILL)
            try world.daemon.waitForExit()
        }
        let world = try HTTPWorld(pageSize: 1, directory: directory)
        #expect(try Self.pages(world, "c1") == [3, 4], "3 and 4 were given but never acknowledged: at-least-once")
    }

    @Test func consumers_read_apart_and_anonymous_readers_do_not_move_them() throws {
        let world = try HTTPWorld(pageSize: 1)
        #expect(try Self.pages(world, "a", count: 3) == [1, 2, 3])
        #expect(try Self.pages(world, "b", count: 1) == [1])
        #expect(try world.curl("/v1/feeds/numbers/pages?after=0&count=5").pageNumbers == [1, 2, 3, 4, 5])
        #expect(try Self.pages(world, "a", count: 1) == [4])
        #expect(try Self.pages(world, "b", count: 1) == [2])
    }

    @Test func an_explicit_ack_is_durable_and_never_passes_what_was_given() throws {
        let directory = try TemporaryDirectory()
        do {
            let world = try HTTPWorld(pageSize: 1, directory: directory)
            #expect(try Self.pages(world, "c1", count: 3) == [1, 2, 3])
            let ack = try world.curl("/v1/feeds/numbers/ack", ["-d", #"{"consumer":"c1","page":2}"#])
            #expect(ack.status == 200 && ack.json == ["type": "ack", "feed": "numbers", "consumer": "c1", "page": 2])
            let tooFar = try world.curl("/v1/feeds/numbers/ack", ["-d", #"{"consumer":"c1","page":50}"#])
            #expect(tooFar.json?["page"] == 3, "pages never given are not acknowledged")
            world.daemon.send(signal: SIGKILL)
            try world.daemon.waitForExit()
        }
        let world = try HTTPWorld(pageSize: 1, directory: directory)
        #expect(try Self.pages(world, "c1", count: 1) == [4])
    }

    @Test func a_consumer_whose_reading_lingered_out_still_acknowledges_what_it_was_given() throws {
        let world = try HTTPWorld(pageSize: 1, http: #"reading_linger = "200ms""#)
        #expect(try Self.pages(world, "slow", count: 2) == [1, 2])
        Thread.sleep(forTimeInterval: 0.6)
        // Its reading is gone, but the daemon remembers what its last answer gave it.
        let ack = try world.curl("/v1/feeds/numbers/ack", ["-d", #"{"consumer":"slow","page":2}"#])
        #expect(ack.json?["page"] == 2)
        Thread.sleep(forTimeInterval: 0.6)
        #expect(try Self.pages(world, "slow", count: 1) == [3])
    }

    @Test func a_head_request_never_moves_a_consumer() throws {
        let world = try HTTPWorld(pageSize: 1)
        #expect(try Self.pages(world, "c1", count: 2) == [1, 2])
        let head = try world.curl("/v1/feeds/numbers/pages?consumer=c1&count=2", ["-I"])
        #expect(head.status == 400)
        #expect(try Self.pages(world, "c1", count: 1) == [3])
    }

    @Test func after_repositions_a_consumer() throws {
        let world = try HTTPWorld(pageSize: 1)
        #expect(try Self.pages(world, "c1", count: 1) == [1])
        #expect(try Self.pages(world, "c1", count: 2, after: 10) == [11, 12])
        #expect(try Self.pages(world, "c1", count: 1) == [13])
    }

    @Test func requests_of_one_consumer_at_once_get_no_page_twice_and_skip_none() throws {
        let world = try HTTPWorld(lines: 200, pageSize: 1)
        let result = try world.python("""
            import json, sys, threading, urllib.request
            base = sys.argv[1]
            got, lock = [], threading.Lock()
            def read():
                for _ in range(5):
                    with urllib.request.urlopen(f"{base}/v1/feeds/numbers/pages?consumer=many&count=3", timeout=20) as reply:
                        pages = [page["page"] for page in json.load(reply)["pages"]]
                    with lock:
                        got.extend(pages)
            threads = [threading.Thread(target=read) for _ in range(8)]
            for thread in threads: thread.start()
            for thread in threads: thread.join()
            print(json.dumps(sorted(got)))
            """)
        #expect(result == .array((1...120).map { .integer(Int64($0)) }))
    }
}
