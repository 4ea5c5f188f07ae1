import FeedKit
import Testing

@testable import FeedEngine

/// ``Subscription`` and ``SubscriptionTable`` alone: every reading state, and what each change
/// tells the client.
@MainActor
@Suite struct SubscriptionTests {
    let client = ClientID(value: 1)

    func page(_ number: Int, generation: Int = 1) -> Page {
        Page(feed: "f", generation: generation, number: number, items: [], isLast: false, encoder: DescribingEncoder())
    }

    func reader(after: Int? = 0, follows: Bool = false, consumer: String? = nil) -> Subscription {
        Subscription(client: client, sink: nil, consumer: consumer, follows: follows, after: after)
    }

    @Test func a_reader_wants_pages_only_while_a_next_waits_and_each_page_answers_the_oldest() {
        let subscription = reader()
        #expect(!subscription.wantsPage && subscription.awaitedPage == nil)
        #expect(subscription.wantedPages(prefetch: 2, limit: 8) == 1...2, "prefetched while idle")
        subscription.ask(2, replyTo: ReplyTag([1]))
        subscription.ask(1, replyTo: ReplyTag([2]))
        #expect(subscription.wantsPage && subscription.awaitedPage == 1)
        #expect(subscription.wantedPages(prefetch: 0, limit: 8) == 1...3, "every page the nexts asked for")
        let replies = (1...3).map { number -> ReplyTag? in
            guard case .page(_, let replyTo) = subscription.deliver(page(number)) else { return nil }
            return replyTo
        }
        #expect(replies == [ReplyTag([1]), ReplyTag([1]), ReplyTag([2])])
        #expect(!subscription.wantsPage && subscription.position == 3 && subscription.cursor == 0)
    }

    @Test func past_the_end_every_next_is_answered_end_and_a_follower_is_told_once() {
        let subscription = reader()
        subscription.ask(1, replyTo: ReplyTag([1]))
        subscription.ask(1, replyTo: ReplyTag([2]))
        let ends = subscription.answerEnd(at: 0, feed: "f", feedEnded: false)
        #expect(ends.count == 2)
        #expect(!subscription.hasPendingRequests)

        let follower = reader(follows: true)
        #expect(follower.wantsPage)
        let forNow = follower.answerEnd(at: 4, feed: "f", feedEnded: false)
        #expect(forNow.isEmpty, "a live source's end for now is not told")
        let forGood = follower.answerEnd(at: 4, feed: "f", feedEnded: true)
        #expect(forGood.count == 1)
        #expect(!follower.wantsPage, "told once")
        follower.ask(1, replyTo: ReplyTag([3]))
        let again = follower.answerEnd(at: 4, feed: "f", feedEnded: true)
        #expect(again.count == 1, "its next is answered, the untagged end not repeated")
        #expect(!follower.wantsPage)
        let refreshed = follower.restart(feed: "f", generation: 2, replyTo: nil)
        #expect(refreshed != nil)
        #expect(follower.wantsPage && follower.position == 0, "a new generation is followed again")
    }

    @Test func a_starting_consumer_moves_nothing_and_keeps_its_nexts_for_after() {
        let subscription = Subscription(client: client, sink: nil, consumer: "dora", follows: false, after: nil, requestedAfter: 7)
        #expect(subscription.isStarting && subscription.startingAfter == .some(7))
        #expect(subscription.wantedPages(prefetch: 3, limit: 8) == nil, "nothing is fetched for it yet")
        let queued = subscription.queue(Subscription.QueuedNext(count: 2, replyTo: nil, answer: { _ in }))
        #expect(queued)
        #expect(subscription.hasPendingRequests && !subscription.wantsPage)
        let told = subscription.restart(feed: "f", generation: 2, replyTo: nil)
        #expect(told == nil, "its subscribed will name the generation")
        let waiting = subscription.confirm(after: 7)
        #expect(waiting?.queued.count == 1 && subscription.position == 7 && subscription.cursor == 7)
        let late = subscription.queue(Subscription.QueuedNext(count: 1, replyTo: nil, answer: { _ in }))
        #expect(!late, "started: asked at once")
    }

    @Test func an_ack_moves_the_cursor_within_what_was_delivered_and_a_consumers_once_durable() {
        let anonymous = reader()
        anonymous.ask(3, replyTo: nil)
        for number in 1...3 { _ = anonymous.deliver(page(number)) }
        let toStore = anonymous.acknowledge(through: 9, durably: true)
        #expect(toStore == nil, "moved at once")
        #expect(anonymous.cursor == 3, "never past the position")

        let consumer = reader(consumer: "dora")
        consumer.ask(3, replyTo: nil)
        for number in 1...3 { _ = consumer.deliver(page(number)) }
        let durable = consumer.acknowledge(through: 2, durably: true)
        #expect(durable == 2)
        #expect(consumer.cursor == 0, "not before it is durable")
        consumer.acknowledged(2)
        #expect(consumer.cursor == 2)
        let back = consumer.acknowledge(through: 1, durably: true)
        #expect(back == nil, "never back")
        let nowhere = consumer.acknowledge(through: 3, durably: false)
        #expect(nowhere == nil && consumer.cursor == 3, "kept nowhere: at once")
    }

    @Test func the_table_keeps_one_subscription_per_client_and_one_client_per_consumer() {
        var table = SubscriptionTable()
        let first = Subscription(client: ClientID(value: 1), sink: nil, consumer: "dora", follows: false, after: 0)
        let none = table.add(first).replaced
        #expect(none == nil)
        let again = Subscription(client: ClientID(value: 1), sink: nil, consumer: nil, follows: false, after: 0)
        let replaced = table.add(again).replaced
        #expect(replaced === first, "subscribing again replaces")
        #expect(table.consumerCount == 0 && !table.reads(consumer: "dora"), "and its consumer is no longer read")
        _ = table.add(Subscription(client: ClientID(value: 2), sink: nil, consumer: "dora", follows: false, after: 0))
        let elsewhere = Subscription(client: ClientID(value: 3), sink: nil, consumer: "dora", follows: false, after: 0)
        let takenOver = table.add(elsewhere).takenOver
        #expect(takenOver?.client == ClientID(value: 2), "a second client takes the consumer over")
        #expect(table.count == 2 && table.consumerCount == 1 && table.cursor(ofConsumer: "dora") == 0)
        let removed = table.remove(consumer: "dora")
        #expect(removed?.client == ClientID(value: 3))
        let gone = table.remove(consumer: "dora")
        #expect(gone == nil && table.count == 1)
    }
}
