import FeedKit
import FeedState

/// The feed answering its clients: subscriptions (a consumer's start made durable first), `next`,
/// acknowledgements through the ``CursorLedger``, and delivery to each client's sink.
extension Feed {
    func subscribe(
        _ client: any ClientHandle, consumer: String?, after: Int?, follows: Bool, answer: @escaping (Result<Subscribed, ServiceError>) -> Void
    ) {
        let floor = storedPages.bodiesDroppedThrough
        if let consumer, !admitsConsumer(consumer) {
            let message = "feed \"\(name)\" already has \(counted(settings.maxConsumers, "consumer")) (max_consumers); forget one first"
            return answer(.failure(ServiceError(.tooManyConsumers, message, feed: name)))
        }
        guard let consumer, ledger.keepsCursors else {
            let start = max(PageNumber.clamped(after ?? 0), floor)
            add(Subscription(client: client.clientID, sink: client, consumer: consumer, follows: follows, after: start))
            answer(.success(Subscribed(feed: name, consumer: consumer, generation: generation, after: start, follows: follows)))
            pump(client.clientID)
            return
        }
        // Held (requests queue on it, no page flows) until the starting point is durable.
        let subscription = Subscription(
            client: client.clientID, sink: client, consumer: consumer, follows: follows, after: nil, requestedAfter: after, announce: answer)
        add(subscription)
        confirmStart(of: subscription, consumer: consumer, after: after)
    }

    /// Makes a starting consumer's start durable (claiming it in the fleet), then lets it read.
    func confirmStart(of subscription: Subscription, consumer: String, after: Int?) {
        Task {
            // Read as the start goes out, together with the ledger's home: the feed may join its
            // fleet (or leave it) before this task runs, and a local generation's number asked of
            // the fleet finds no cursor there, so a consumer would resume at 0 (issue 22).
            let (generation, floor, paging) = (generation, storedPages.bodiesDroppedThrough, paging)
            let outcome: Result<Int, StoreError>
            do throws(StoreError) {
                outcome = .success(
                    try await ledger.start(consumer: consumer, after: after, floor: floor, generation: generation, recordable: paging.knowsTokens))
            } catch {
                outcome = .failure(error)
            }
            let client = subscription.client
            guard subscription.isStarting else { return }
            if subscription.isEnded {
                // Replaced by the same client's later subscribe: this request still gets its answer
                // (SPEC §5: every request is answered), and the nexts queued on it go to the
                // subscription reading now. A client that left, or whose consumer was taken over,
                // has no subscription here, and nobody waits for this start.
                guard let current = subscriptions[client], current !== subscription else { return }
            }
            switch outcome {
            case .success(let start):
                // A generation started meanwhile: the consumer starts at its page 0.
                let position = generation == self.generation ? start : 0
                guard let waiting = subscription.confirm(after: position) else { return }
                let subscribed = Subscribed(feed: name, consumer: consumer, generation: self.generation, after: position, follows: subscription.follows)
                waiting.announce(.success(subscribed))
                for queued in waiting.queued { next(client, count: queued.count, replyTo: queued.replyTo, subscribed: nil, answer: queued.answer) }
                pump(client)
            case .failure(let error):
                let waiting = subscription.isEnded ? subscription.confirm(after: 0) : remove(client)?.start
                let failure = ServiceError.storeFailed("the cursor of consumer \"\(consumer)\" could not be stored", error, feed: name)
                waiting?.announce(.failure(failure))
                for queued in waiting?.queued ?? [] { queued.answer(.failure(failure)) }
            }
        }
    }

    private func add(_ subscription: Subscription) {
        let (_, takenOver) = subscriptions.add(subscription)
        if let takenOver, let consumer = takenOver.consumer {
            takenOver.sink?.receive(.unsubscribed(feed: name, reason: .takenOver(consumer: consumer)))
        }
    }

    /// Ends `client`'s subscription; returns what was waiting on it.
    @discardableResult
    func remove(_ client: ClientID) -> (start: Subscription.Start?, unanswered: [ReplyTag?])? {
        subscriptions.remove(client)?.dropRequests()
    }

    func next(
        _ client: ClientID, count: Int, replyTo: ReplyTag?, subscribed: Subscribed?, answer: @escaping (Result<Subscribed?, ServiceError>) -> Void
    ) {
        guard let subscription = subscriptions[client] else {
            return answer(.failure(ServiceError(.badRequest, "not subscribed to \"\(name)\"", feed: name)))
        }
        if subscription.queue(Subscription.QueuedNext(count: count, replyTo: replyTo, answer: answer)) { return }
        acknowledge(subscription, through: subscription.position ?? 0) { [self] result in
            switch result {
            case .success:
                // A reload may have handed the subscription to this feed's successor meanwhile.
                guard !subscription.isEnded, let owner = subscriptions[client] === subscription ? self : successor else {
                    return answer(.success(subscribed))
                }
                subscription.ask(count, replyTo: replyTo)
                answer(.success(subscribed))
                owner.pump(client)
            case .failure(let error):
                let message = "the pages delivered before this next could not be acknowledged, so none was sent"
                answer(.failure(.storeFailed(message, error, feed: name)))
            }
        }
    }

    /// Marks pages up to `page` consumed; `completion` gets the cursor, once durable for a consumer.
    func acknowledge(_ subscription: Subscription, through page: Int, completion: @escaping (Result<Int, StoreError>) -> Void) {
        let before = subscription.cursor
        guard let cursor = subscription.acknowledge(through: page, durably: ledger.keepsCursors), let consumer = subscription.consumer else {
            if let consumer = subscription.consumer, subscription.cursor != before { ledger.noteAcknowledged(consumer) }
            return completion(.success(subscription.cursor ?? 0))
        }
        let generation = generation
        ledger.write(consumer: consumer, cursor: cursor, generation: generation) { [self] result in
            if case .failure(let error) = result {
                logger.error("cannot store the cursor of consumer \(consumer): \(error)")
                return completion(.failure(error))
            }
            // A refresh while the write was on its way has put the cursor back to 0 since.
            if generation == self.generation { subscription.acknowledged(cursor) }
            ledger.noteAcknowledged(consumer)
            completion(.success(subscription.cursor ?? 0))
        }
    }

    // MARK: Delivery

    /// Delivers to `client` every page it wants that is ready and that it can take, answers its
    /// `next`s with `end` past the last page, then fetches what is missing once the turn is over.
    func pump(_ client: ClientID) {
        guard let subscription = subscriptions[client] else { return advanceUpstreamAfterTurn() }
        deliver(to: subscription)
        if planner.canSkip(after: subscription, look: currentLook, demand: demand, cache: cache, paging: paging) { return }
        advanceUpstreamAfterTurn()
    }

    /// Only the subscriptions that want a page are visited: when a prefetched page lands, a
    /// thousand consumers answered from the cache want none.
    func wakeSubscribers() {
        let waiting = subscriptions.all.filter(\.wantsPage)
        for subscription in waiting { deliver(to: subscription) }
        advanceUpstreamAfterTurn()
    }

    /// Pages are queued a window at a time and written together, so a subscriber catching up on
    /// cached pages costs one write per window, not one per page.
    private func deliver(to subscription: Subscription) {
        guard let sink = subscription.sink else { return }
        defer { sink.flush() }
        let recordsAhead = subscription.consumer != nil && ledger.recordsLocally
        // A client told something may leave (and so end its subscription) right then.
        while subscription.wantsPage, !subscription.isEnded, let position = subscription.position {
            let number = position + 1
            if let lastPage = paging.lastPage, number > lastPage {
                return send(subscription.answerEnd(at: lastPage, feed: name, feedEnded: true), to: sink)
            }
            guard let page = cache[number] else {
                if paging.caughtUpAt == number { send(subscription.answerEnd(at: number - 1, feed: name, feedEnded: false), to: sink) }
                return
            }
            if !sink.canTakePage {
                sink.flush()
                guard sink.canTakePage else { return }
            }
            let event = subscription.deliver(page)
            counters.pagesDelivered += 1
            // Every page filed so far, not only this one: in a storm the consumers that reach a
            // page after the first would otherwise find its record still on its way, and their
            // acks would wait for that commit before their cursors could be queued.
            if recordsAhead { storedPages.recordAhead(through: max(number, paging.furthestFiled)) }
            sink.receive(event)
        }
    }

    func send(_ events: [ClientEvent], to sink: any ClientSink) {
        for event in events { sink.receive(event) }
    }
}
