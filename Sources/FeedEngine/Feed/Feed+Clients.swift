import FeedKit
import FeedState

/// The feed answering its clients: subscriptions (a consumer's start made durable first), `next`,
/// acknowledgements through the ``CursorLedger``, and delivery to each client's sink.
extension Feed {
    func subscribe(
        _ client: ClientHandle, consumer: String?, after: Int?, follows: Bool, answer: @escaping (Result<Subscribed, ServiceError>) -> Void
    ) {
        lastSerial += 1
        let serial = lastSerial
        let floor = storedPages.bodiesDroppedThrough
        guard let consumer, ledger.keepsCursors else {
            let start = max(PageNumber.clamped(after ?? 0), floor)
            add(Subscription(client: client.id, serial: serial, sink: client.sink, consumer: consumer, follows: follows, after: start))
            answer(.success(Subscribed(feed: name, consumer: consumer, generation: generation, after: start, follows: follows)))
            pump(client.id)
            return
        }
        // Held (requests queue on it, no page flows) until the starting point is durable.
        add(Subscription(
            client: client.id, serial: serial, sink: client.sink, consumer: consumer, follows: follows, after: nil, requestedAfter: after,
            announce: answer))
        confirmStart(of: client.id, serial: serial, consumer: consumer, after: after)
    }

    /// Makes a starting consumer's start durable (claiming it in the fleet), then lets it read.
    func confirmStart(of client: ClientID, serial: Int, consumer: String, after: Int?) {
        let (generation, floor, paging) = (generation, storedPages.bodiesDroppedThrough, paging)
        Task {
            let outcome: Result<Int, StoreError>
            do throws(StoreError) {
                outcome = .success(
                    try await ledger.start(consumer: consumer, after: after, floor: floor, generation: generation, recordable: paging.knowsTokens))
            } catch {
                outcome = .failure(error)
            }
            guard subscriptions[client]?.serial == serial, subscriptions[client]?.isStarting == true else { return }
            switch outcome {
            case .success(let start):
                // A generation started meanwhile: the consumer starts at its page 0.
                let position = generation == self.generation ? start : 0
                guard let waiting = subscriptions.update(client, { $0.confirm(after: position) }) ?? nil else { return }
                let follows = subscriptions[client]?.follows ?? false
                waiting.announce(.success(Subscribed(feed: name, consumer: consumer, generation: self.generation, after: position, follows: follows)))
                for queued in waiting.queued { next(client, count: queued.count, replyTo: queued.replyTo, answer: queued.answer) }
                pump(client)
            case .failure(let error):
                let waiting = remove(client)?.start
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
        guard var removed = subscriptions.remove(client) else { return nil }
        return removed.dropRequests()
    }

    func next(_ client: ClientID, count: Int, replyTo: ReplyTag?, answer: @escaping (Result<Void, ServiceError>) -> Void) {
        guard let subscription = subscriptions[client] else {
            return answer(.failure(ServiceError(.badRequest, "not subscribed to \"\(name)\"", feed: name)))
        }
        let queued = Subscription.QueuedNext(count: count, replyTo: replyTo, answer: answer)
        if subscriptions.update(client, { $0.queue(queued) }) == true { return }
        acknowledge(client, through: subscription.position ?? 0) { [self] result in
            switch result {
            case .success:
                guard subscriptions[client]?.serial == subscription.serial else { return answer(.success(())) }
                subscriptions.update(client) { $0.ask(count, replyTo: replyTo) }
                answer(.success(()))
                pump(client)
            case .failure(let error):
                let message = "the pages delivered before this next could not be acknowledged, so none was sent"
                answer(.failure(.storeFailed(message, error, feed: name)))
            }
        }
    }

    /// Marks pages up to `page` consumed; `completion` gets the cursor, once durable for a consumer.
    func acknowledge(_ client: ClientID, through page: Int, completion: @escaping (Result<Int, StoreError>) -> Void) {
        guard let subscription = subscriptions[client] else { return completion(.success(0)) }
        guard let cursor = subscriptions.update(client, { $0.acknowledge(through: page, durably: ledger.keepsCursors) }) ?? nil,
            let consumer = subscription.consumer
        else { return completion(.success(subscriptions[client]?.cursor ?? 0)) }
        let generation = generation
        ledger.write(consumer: consumer, cursor: cursor, generation: generation) { [self] result in
            if case .failure(let error) = result {
                logger.error("cannot store the cursor of consumer \(consumer): \(error)")
                return completion(.failure(error))
            }
            // A refresh while the write was on its way has put the cursor back to 0 since.
            if generation == self.generation, subscriptions[client]?.serial == subscription.serial {
                subscriptions.update(client) { $0.acknowledged(cursor) }
            }
            completion(.success(subscriptions[client]?.cursor ?? 0))
        }
    }

    // MARK: Delivery

    /// Delivers to `client` every page it wants that is ready and that it can take, answers its
    /// `next`s with `end` past the last page, then fetches what is missing.
    func pump(_ client: ClientID) {
        deliver(to: client)
        if let subscription = subscriptions[client],
            planner.canSkip(after: subscription, look: currentLook, demand: demand, cache: cache, paging: paging)
        {
            return
        }
        advanceUpstream()
    }

    /// Only the subscriptions that want a page are visited: when a prefetched page lands, a
    /// thousand consumers answered from the cache want none.
    func wakeSubscribers() {
        let waiting = subscriptions.all.compactMap { $0.wantsPage ? $0.client : nil }
        for client in waiting { deliver(to: client) }
        advanceUpstream()
    }

    /// Pages are queued a window at a time and written together, so a subscriber catching up on
    /// cached pages costs one write per window, not one per page.
    private func deliver(to client: ClientID) {
        guard let sink = subscriptions[client]?.sink else { return }
        defer { sink.flush() }
        while let subscription = subscriptions[client], subscription.wantsPage, let position = subscription.position {
            let number = position + 1
            if let lastPage = paging.lastPage, number > lastPage {
                return send(subscriptions.update(client) { $0.answerEnd(at: lastPage, feed: name, feedEnded: true) } ?? [], to: sink)
            }
            guard let page = cache[number] else {
                if paging.caughtUpAt == number {
                    send(subscriptions.update(client) { $0.answerEnd(at: number - 1, feed: name, feedEnded: false) } ?? [], to: sink)
                }
                return
            }
            if !sink.canTakePage {
                sink.flush()
                guard sink.canTakePage else { return }
            }
            guard let event = subscriptions.update(client, { $0.deliver(page) }) else { return }
            counters.pagesDelivered += 1
            if subscription.consumer != nil, case .local = ledger.home { storedPages.recordAhead(through: number) }
            sink.receive(event)
        }
    }

    func send(_ events: [ClientEvent], to sink: any ClientSink) {
        for event in events { sink.receive(event) }
    }
}
