import FeedKit
import Testing

@testable import FeedEngine
@testable import FeedState

/// ``CursorLedger`` and ``StoredPages`` over a store whose writes fail as a full disk fails them
/// (issue 24): only what must be durable answers `store_failed`, pages that can be fetched again
/// are served all the same, and a cursor is never refused as out of range.
@MainActor
@Suite(.timeLimit(.minutes(1))) struct DurabilityTests {
    /// A world with a store, its consumer `dora` subscribed and `pages` pages read and acknowledged.
    func world(read pages: Int) async -> (ScriptedWorld, Reader) {
        let world = ScriptedWorld(store: MemoryState(), direct: true)
        let (_, dora) = world.subscribe(after: 0, consumer: "dora")
        await world.settle()
        if pages > 0 {
            dora.next(pages)
            await answer(world, pages: pages)
            dora.acknowledge(pages)
            await world.settle()
        }
        return (world, dora)
    }

    func answer(_ world: ScriptedWorld, pages: Int) async {
        for _ in 0..<pages {
            await world.settle()
            world.script.answer(.page(items: 1, next: .more(token: nil)))
        }
        await world.settle()
    }

    func acknowledged(_ reader: Reader, _ page: Int, in world: ScriptedWorld) async -> Result<Int, ServiceError>? {
        var outcome: Result<Int, ServiceError>?
        reader.acknowledge(page) { outcome = $0 }
        await world.settle()
        return outcome
    }

    @Test func a_page_whose_record_cannot_be_stored_is_served_and_its_ack_answers_store_failed_not_out_of_range() async throws {
        let (world, dora) = await world(read: 2)
        let store = try #require(world.store)
        #expect(store.cursor(feed: "scripted", consumer: "dora")?.cursor == 2)

        store.faults.pages = true
        dora.next()
        await answer(world, pages: 1)
        #expect(dora.log.pages.map(\.number) == [1, 2, 3], "page 3 needs nothing stored to be served")
        let refused = await acknowledged(dora, 3, in: world)
        guard case .failure(let error) = refused else {
            Issue.record("the ack of page 3 was answered \(String(describing: refused))")
            return
        }
        #expect(error.code == .storeFailed)
        #expect(error.message.contains("the disk is full") && !error.message.contains("outside"), "\(error.message)")
        #expect(store.cursor(feed: "scripted", consumer: "dora")?.cursor == 2, "nothing was acknowledged")

        store.faults.pages = false
        #expect(try await acknowledged(dora, 3, in: world)?.get() == 3)
        #expect(store.cursor(feed: "scripted", consumer: "dora")?.cursor == 3)
    }

    @Test func a_cursor_that_cannot_be_stored_fails_the_next_that_needs_it_and_sends_no_page() async throws {
        let (world, dora) = await world(read: 1)
        dora.next()
        await answer(world, pages: 1)
        let store = try #require(world.store)
        store.faults.cursors = true
        dora.next()
        await world.settle()
        #expect(dora.log.failures.map(\.code) == [.storeFailed])
        #expect(dora.log.pages.map(\.number) == [1, 2], "no page after a failed implicit ack")
        store.faults.cursors = false
        dora.next()
        await answer(world, pages: 1)
        #expect(dora.log.pages.map(\.number) == [1, 2, 3])
        #expect(store.cursor(feed: "scripted", consumer: "dora")?.cursor == 2)
    }

    @Test func a_consumer_whose_start_cannot_be_stored_is_refused_with_its_waiting_nexts() async throws {
        let world = ScriptedWorld(store: MemoryState())
        let store = try #require(world.store)
        store.faults = .all
        let (log, dora) = world.subscribe(after: 0, consumer: "dora")
        dora.next(2)
        await world.settle()
        #expect(log.failures.map(\.code) == [.storeFailed, .storeFailed], "the subscribe, then the next that waited on it")
        #expect(world.feed.subscriberCount == 0)
        #expect(world.script.calls.isEmpty)
    }

    @Test func a_refresh_that_cannot_be_stored_changes_nothing() async throws {
        let (world, dora) = await world(read: 1)
        let store = try #require(world.store)
        store.faults.generations = true
        var outcome: Result<FeedService.Refreshed, ServiceError>?
        world.service.refresh("scripted") { outcome = $0 }
        await world.settle()
        guard case .failure(let error) = outcome else {
            Issue.record("refreshed: \(String(describing: outcome))")
            return
        }
        #expect(error.code == .storeFailed)
        #expect(world.feed.generation == 1 && world.feed.cachedPages == 1)
        #expect(!dora.log.events.contains { if case .refreshed = $0 { true } else { false } })
    }

    /// One write per consumer is in flight; the acks that come meanwhile are merged, the latest winning.
    @Test func acks_made_while_a_cursor_write_is_in_flight_are_merged_into_the_next_one() async throws {
        let (world, dora) = await world(read: 0)
        dora.next(5)
        await answer(world, pages: 5)
        let store = try #require(world.store)
        let before = store.committed.count
        var answers: [Int] = []
        for page in 1...5 { dora.acknowledge(page) { if case .success(let cursor) = $0 { answers.append(cursor) } } }
        await world.settle()
        #expect(answers.count == 5 && answers.last == 5)
        let cursorWrites = store.committed.dropFirst(before).filter { $0.hasPrefix("setCursor") }
        #expect(cursorWrites.count <= 2, "\(cursorWrites)")
        #expect(store.cursor(feed: "scripted", consumer: "dora")?.cursor == 5)
    }

    /// A source that cannot fetch a page again (an `rss` poll, say): each page is served only once
    /// a commit holds it with its items (issue 26), so a restart serves each as it was; a page
    /// whose commit fails is not served, nor any after it, and the reader is told why.
    @Test(arguments: [false, true])
    func a_page_that_cannot_be_fetched_again_is_served_only_once_it_is_stored(diskFull: Bool) async throws {
        let world = ScriptedWorld(store: MemoryState(), reproducesPages: false)
        let store = try #require(world.store)
        let (log, reader) = world.subscribe()
        await world.settle()
        let recordsBefore = store.committed.filter { $0.hasPrefix("recordPages") }.count
        store.faults.pages = diskFull
        reader.next(3)
        for page in 1...3 {
            await world.settle()
            for served in log.pages {
                #expect(store.feed("scripted")?.keepsItems(of: served.number) == true, "page \(served.number) was served before it was stored")
            }
            world.script.answer(.page(items: 1, next: .more(token: "after-\(page)")))
        }
        await world.settle()

        let records = store.committed.filter { $0.hasPrefix("recordPages") }.dropFirst(recordsBefore)
        if diskFull {
            #expect(log.pages.isEmpty && records.isEmpty)
            let told = log.events.contains { event in
                if case .upstreamFailing(_, let message, _, _) = event { message.contains("cannot be stored") } else { false }
            }
            #expect(told, "the reader is told why: \(log.events)")
        } else {
            #expect(log.pages.map(\.number) == [1, 2, 3])
            #expect(store.feed("scripted")?.pages.count == 3 && (1...3).allSatisfy { store.feed("scripted")?.keepsItems(of: $0) == true })
        }
    }

    /// The pages a run fetches while a commit is in flight wait for it and are stored together by
    /// the next one, while the run fetches on: the first page is served as soon as its own commit
    /// is done, not at the run's end (issue 26), and three pages cost two commits.
    @Test func pages_fetched_while_a_commit_is_in_flight_are_stored_together_by_the_next() async throws {
        let world = ScriptedWorld(store: MemoryState(), reproducesPages: false)
        let store = try #require(world.store)
        let (log, reader) = world.subscribe()
        await world.settle()
        let recordsBefore = store.committed.filter { $0.hasPrefix("recordPages") }.count
        reader.next(3)
        await world.settle()
        store.holdsPageWrites = true
        world.script.answer(.page(items: 1, next: .more(token: "after-1")))
        await world.settle()
        #expect(log.pages.isEmpty, "page 1 was served while its commit was held")
        for page in 2...3 {
            world.script.answer(.page(items: 1, next: .more(token: "after-\(page)")))
            await world.settle()
        }
        #expect(log.pages.isEmpty)
        store.holdsPageWrites = false
        await world.settle()
        #expect(log.pages.map(\.number) == [1, 2, 3])
        let records = store.committed.filter { $0.hasPrefix("recordPages") }.dropFirst(recordsBefore)
        #expect(records.count == 2, "\(records.count) commits for 3 pages, 2 of them fetched while the first committed")
    }

    /// Only the pages waiting for the next commit hold a run back, not the commit in flight:
    /// with 1.5 MB pages and page 1's commit held, the run fetches pages 2 to 4 (4.5 MB waiting)
    /// before it waits, so they go in one commit rather than 2 and 3 in one and 4 alone.
    @Test func a_run_waits_for_room_only_for_the_pages_waiting_for_the_next_commit() async throws {
        let world = ScriptedWorld(bytesPerItem: 1_500_000, store: MemoryState(), reproducesPages: false)
        let store = try #require(world.store)
        let (log, reader) = world.subscribe()
        await world.settle()
        reader.next(6)
        await world.settle()
        store.holdsPageWrites = true
        // Answers the run's calls until it stops asking. Each of the first `expected` is waited
        // for (up to 10 s: encoding a 1.5 MB page is slow in a debug or sanitized build); a
        // later one is looked for through 20 settles, which a plain build's encoding fits in.
        var answered = 0
        func answerCalls(expected: Int) async {
            while answered < 6 {
                let deadline = ContinuousClock.now + .seconds(10)
                var settles = 0
                while world.script.pendingCalls.isEmpty, answered < expected ? ContinuousClock.now < deadline : settles < 20 {
                    await world.settle()
                    settles += 1
                }
                guard world.script.answer(.page(items: 1, next: .more(token: "after-\(answered + 1)"))) != nil else { return }
                answered += 1
            }
        }
        await answerCalls(expected: 4)
        #expect(answered == 4, "pages fetched while page 1 committed")
        #expect(log.pages.isEmpty)
        store.holdsPageWrites = false
        await answerCalls(expected: 6)
        // The last commit and its serving, waited for as the calls were.
        let served = ContinuousClock.now + .seconds(10)
        while log.pages.count < 6, ContinuousClock.now < served { await world.settle() }
        #expect(log.pages.map(\.number) == [1, 2, 3, 4, 5, 6])
    }

    /// A stored run's budget is the source's time, not the daemon's encoding of its pages: four
    /// pages that take 5 ms each to encode come in one run (issue 26: a run cut short on its
    /// encoding left a document's last pages waiting for its commits and a run of their own).
    @Test func encoding_a_stored_runs_pages_does_not_count_against_its_budget() async throws {
        let clock = ManualClock()
        let world = ScriptedWorld(
            encoder: ClockAdvancingEncoder(clock: clock, perPage: .milliseconds(5)), store: MemoryState(), clock: clock,
            reproducesPages: false)
        let (log, reader) = world.subscribe()
        await world.settle()
        reader.next(4)
        for page in 1...4 {
            await world.settle()
            world.script.answer(.page(items: 1, next: .more(token: "after-\(page)")))
        }
        await world.settle()
        #expect(log.pages.map(\.number) == [1, 2, 3, 4])
        #expect(world.feed.counters.upstreamDuration.count == 1, "the run stopped on its pages' encoding")
    }

    /// The source's own time still ends a stored run: with 5 ms a call, the calls for pages 2 and
    /// 3 spend the budget, and page 4 is a run of its own.
    @Test func a_stored_run_stops_once_its_source_has_spent_the_budget() async throws {
        let world = ScriptedWorld(store: MemoryState(), reproducesPages: false)
        let (log, reader) = world.subscribe()
        await world.settle()
        reader.next(4)
        for page in 1...4 {
            await world.settle()
            if page > 1 { world.clock.advance(by: .milliseconds(5)) }
            world.script.answer(.page(items: 1, next: .more(token: "after-\(page)")))
        }
        await world.settle()
        #expect(log.pages.map(\.number) == [1, 2, 3, 4])
        #expect(world.feed.counters.upstreamDuration.count == 2)
    }

    /// A run goes on fetching while its pages commit, and serves each once stored: page 1 is
    /// served while the source has not answered page 2 yet.
    @Test func a_stored_page_is_served_before_its_run_ends() async throws {
        let world = ScriptedWorld(store: MemoryState(), reproducesPages: false)
        let store = try #require(world.store)
        let (log, reader) = world.subscribe()
        await world.settle()
        reader.next(3)
        await world.settle()
        world.script.answer(.page(items: 1, next: .more(token: "after-1")))
        await world.settle()
        #expect(log.pages.map(\.number) == [1], "page 1 waited for the run's end")
        #expect(store.feed("scripted")?.keepsItems(of: 1) == true)
    }
}

/// Encodes as ``DescribingEncoder`` does, moving the clock on by `perPage` for each page, as a
/// large page's encoding takes time.
struct ClockAdvancingEncoder: PageEncoder {
    let clock: ManualClock
    let perPage: Duration

    func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes {
        clock.advance(by: perPage)
        return DescribingEncoder().encode(feed: feed, generation: generation, number: number, items: items, isLast: isLast)
    }
}
