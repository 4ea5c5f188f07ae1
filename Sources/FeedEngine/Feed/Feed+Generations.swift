import FeedKit
import FeedState

/// The feed moving between generations: a refresh (here or in the fleet), the fleet's own, one
/// of its own while it serves alone, a reload, and its end.
extension Feed {
    /// Pull-to-refresh: once the new generation is durable (in the fleet, for a shared feed), drops
    /// every cached page, makes it current and tells every subscription, whose position goes back
    /// to 0. `requester`'s own `refreshed` carries `replyTo`. `answer` gets the new generation, or
    /// why it could not be stored (then nothing changed).
    func refresh(requester: ClientID? = nil, replyTo: ReplyTag? = nil, answer: @escaping (Result<Int, StoreError>) -> Void = { _ in }) {
        if membership.isShared { return refreshInFleet(requester: requester, replyTo: replyTo, answer: answer) }
        guard requestedGeneration < StoredFeed.maximumGeneration else {
            return answer(.failure(.unavailable("feed \(name) is at generation \(requestedGeneration), the last there can be")))
        }
        requestedGeneration += 1
        let (newGeneration, seed, fingerprint) = (requestedGeneration, GenerationPaging.randomSeed(), settings.contentFingerprint)
        Task {
            do throws(StoreError) {
                try await storedPages.store(generation: newGeneration, seed: seed, fingerprint: fingerprint)
            } catch {
                logger.error("cannot store generation \(newGeneration): \(error)")
                requestedGeneration = max(generation, requestedGeneration - 1)
                return answer(.failure(error))
            }
            // A later refresh, stored first, has moved on already.
            guard newGeneration > generation, !upstream.isStopped else { return answer(.success(generation)) }
            storedPages.adopt(newGeneration, seed: seed, fingerprint: fingerprint)
            enterGeneration(newGeneration, seed: seed, requester: requester, replyTo: replyTo)
            answer(.success(newGeneration))
        }
    }

    /// `refresh` of a shared feed: the fleet's next generation, which every instance adopts.
    private func refreshInFleet(requester: ClientID?, replyTo: ReplyTag?, answer: @escaping (Result<Int, StoreError>) -> Void) {
        guard let link = membership.refreshStarted() else {
            return answer(.failure(.unavailable("feed \(name) has not joined its fleet yet: it cannot be reached")))
        }
        let (seed, fingerprint, current) = (GenerationPaging.randomSeed(), settings.contentFingerprint, generation)
        Task {
            let outcome: Result<FleetGeneration, FleetError>
            do throws(FleetError) {
                outcome = .success(try await link.refresh(feed: name, replacing: current, seed: seed, fingerprint: fingerprint))
            } catch {
                outcome = .failure(error)
            }
            if case .success(let started) = outcome, started.number > generation, started.fingerprint == fingerprint {
                enterGeneration(started.number, seed: started.seed, requester: requester, replyTo: replyTo)
            }
            if let held = membership.refreshEnded() { performFleet(membership.generationAnnounced(held, current: generation)) }
            switch outcome {
            case .success:
                answer(.success(generation))
            case .failure(let error):
                logger.error("cannot start a new generation in the fleet: \(error)")
                answer(.failure(.unavailable(error.description)))
            }
        }
    }

    /// Makes `number` current and pages the source from its first page again; every subscription
    /// restarts at 0 and is told so (`requester`'s with `replyTo`).
    func enterGeneration(_ number: Int, seed: String, requester: ClientID? = nil, replyTo: ReplyTag? = nil) {
        _ = upstream.abandon(now: clock.now, timeout: settings.timeout)
        watchDeadlines()
        paging = GenerationPaging(number: number, addressing: adapter.pageAddressing, wraps: settings.wrap, seed: seed)
        if number > StoredFeed.maximumGeneration { lastLocalGeneration = max(lastLocalGeneration, number) }
        if !membership.isShared { requestedGeneration = max(requestedGeneration, number) }
        cache.removeAll()
        upstream.recovered()
        planner.forget()
        onNewGeneration?()
        let events = subscriptions.updateAll { $0.restart(feed: name, generation: number, replyTo: $0.client == requester ? replyTo : nil) }
        for (client, event) in events {
            if let event { subscriptions[client]?.sink?.receive(event) }
        }
        wakeSubscribers()
    }

    /// A page whose items the store dropped (or cannot read back), of a source that cannot fetch
    /// it again, cannot be served as it was: fetching it again could leave out items a consumer
    /// was sent and never acknowledged. So the feed starts a new generation, as a `refresh` does,
    /// with every consumer back at 0 (SPEC §3: duplicates, never a gap); nothing is fetched meanwhile.
    func startOver(because reason: String) {
        guard !isStartingOver else { return }
        isStartingOver = true
        logger.warning("\(reason); starting a new generation with every consumer at 0")
        refresh { result in
            Task {
                // The store refused the new generation (a full disk, say): try again in a while.
                if case .failure = result { try? await self.clock.sleep(until: self.clock.now + .seconds(1)) }
                self.isStartingOver = false
                self.wakeSubscribers()
            }
        }
    }

    // MARK: The fleet

    func handleFleet(_ input: FleetInput) {
        switch input {
        case .attached(let link):
            performFleet(membership.attach(link))
        case .joined(let fleetGeneration):
            performFleet(membership.joinAnswered(fleetGeneration, fingerprint: settings.contentFingerprint))
        case .joinFailed(let error, let reachable):
            performFleet(membership.joinFailed(error, reachable: reachable, fleetName: membership.linkName ?? ""))
        case .retryJoin:
            performFleet(membership.retry())
        case .generationAnnounced(let fleetGeneration):
            performFleet(membership.generationAnnounced(fleetGeneration, current: generation))
        case .claimedElsewhere(let consumer):
            if let takenOver = subscriptions.remove(consumer: consumer) {
                takenOver.sink?.receive(.unsubscribed(feed: name, reason: .takenOver(consumer: consumer)))
            }
        }
    }

    func performFleet(_ action: FleetMembership.Action) {
        ledger.home = cursorHome
        switch action {
        case .none:
            break
        case .join(let link):
            let (number, seed, fingerprint) = (storedPages.generation, paging.seed, settings.contentFingerprint)
            Task {
                do throws(FleetError) {
                    handle(.fleet(.joined(try await link.join(feed: name, fingerprint: fingerprint, generation: number, seed: seed))))
                } catch {
                    handle(.fleet(.joinFailed(error, reachable: link.isConnected)))
                }
            }
        case .joinLater(let warning):
            if let warning { logger.warning(warning) }
            Task {
                try? await clock.sleep(until: clock.now + .seconds(1))
                handle(.fleet(.retryJoin))
            }
        case .enter(let fleetGeneration, let joining):
            if joining { logger.notice("joined the fleet \"\(membership.linkName ?? "")\" at generation \(fleetGeneration.number)") }
            guard fleetGeneration.number != generation || fleetGeneration.seed != paging.seed else { return }
            enterGeneration(fleetGeneration.number, seed: fleetGeneration.seed)
        case .serveAlone(.otherDefinition(let fleetFingerprint)):
            logger.warning(
                "serving this feed alone: the fleet \"\(membership.linkName ?? "")\" serves another definition of it "
                    + "(its source, options or wrap differ; fingerprint \(fleetFingerprint), here \(settings.contentFingerprint))")
            // Served as this instance's own from now on: the local generation, under its own number.
            enterGeneration(storedPages.generation, seed: storedPages.seed)
        case .serveAlone(.unreachable):
            logger.warning("the fleet \"\(membership.linkName ?? "")\" cannot be reached: serving this feed alone under a local generation until it can")
            startLocalGeneration()
            performFleet(.joinLater(warning: nil))
        }
    }

    /// Starts a new local generation of a shared feed (see ``FleetMembership``): numbered past the
    /// fleet's, and after every local one before.
    private func startLocalGeneration() {
        let number = FleetMembership.localGeneration(after: lastLocalGeneration)
        enterGeneration(number, seed: GenerationPaging.randomSeed())
    }

    // MARK: Reloads and the end

    /// Applies a reload that changes how the feed is fetched but not what its pages contain
    /// (`timeout`, `poll`, `prefetch`, `retry_max_delay`, `cache_pages`, `cache_bytes`): the
    /// generation, the cache, every cursor and every subscription stay.
    func reconfigure(_ definition: FeedDefinition) {
        precondition(definition.settings.shapesSamePages(as: settings), "a change to what pages contain needs a new generation")
        settings = definition.settings
        upstream.retryPolicy.maximumDelay = settings.retryMaxDelay
        makeAdapter = definition.makeAdapter
        replacementAdapter = definition.adapter
        // A wait for new data waits on the old `poll`; look again with the new one.
        if case .waitForNewData? = upstream.call?.work { _ = upstream.abandon(now: clock.now, timeout: settings.timeout) }
        if !upstream.hasCallInFlight { takeReplacementAdapter() }
        // A shorter `timeout` may put the call in flight's deadline before the watch's wake-up.
        deadlineWatch?.task.cancel()
        deadlineWatch = nil
        watchDeadlines()
        trimCache()
        planner.forget()
        wakeSubscribers()
    }

    /// Ends every subscription and stops fetching: the feed was removed.
    func close() {
        var table = stop()
        for subscription in table.removeAll() {
            subscription.sink?.receive(.unsubscribed(feed: name, reason: .feedRemoved))
        }
    }

    /// Stops fetching and hands over every subscription, to the feed replacing this one.
    func retire() -> SubscriptionTable {
        stop()
    }

    private func stop() -> SubscriptionTable {
        upstream.stop()?.task.cancel()
        deadlineWatch?.task.cancel()
        cache.removeAll()
        let adapters = [adapter] + (replacementAdapter.map { [$0] } ?? [])
        replacementAdapter = nil
        Task { for adapter in adapters { await adapter.shutdown() } }
        let table = subscriptions
        subscriptions = SubscriptionTable()
        return table
    }

    /// Takes over the subscriptions of the feed this one replaces after a reload changed what its
    /// pages contain (or, in a fleet, its sharing): they start over at page 0 of a new generation
    /// and are told so; consumers still starting are confirmed here.
    func adopt(_ table: SubscriptionTable, after oldGeneration: Int, from predecessor: Feed) {
        predecessor.successor = self
        // The metrics' counters go on: a feed's `_total`s never go back while the daemon runs.
        counters = predecessor.counters
        // A feed made after a change to its pages already follows the stored generation.
        if case .solo = membership, generation <= oldGeneration {
            let number = min(oldGeneration + 1, StoredFeed.maximumGeneration)
            let seed = GenerationPaging.randomSeed()
            storedPages.adopt(number, seed: seed, fingerprint: settings.contentFingerprint)
            storedPages.storeGenerationSoon()
            paging = GenerationPaging(number: number, addressing: adapter.pageAddressing, wraps: settings.wrap, seed: seed)
            requestedGeneration = max(requestedGeneration, number)
        }
        // A shared feed made in the same millisecond as its predecessor's local generation: after it.
        if generation > StoredFeed.maximumGeneration, generation <= predecessor.lastLocalGeneration {
            let number = FleetMembership.localGeneration(after: predecessor.lastLocalGeneration)
            paging = GenerationPaging(number: number, addressing: adapter.pageAddressing, wraps: settings.wrap, seed: paging.seed)
        }
        lastLocalGeneration = max(lastLocalGeneration, predecessor.lastLocalGeneration)
        subscriptions = table
        for subscription in table.all {
            if let after = subscription.startingAfter, let consumer = subscription.consumer {
                confirmStart(of: subscription, consumer: consumer, after: after)
            }
        }
        enterGeneration(generation, seed: paging.seed)
    }
}

extension FleetMembership {
    /// The fleet's name, once the daemon has a link to it.
    var linkName: String? {
        switch self {
        case .solo: nil
        case .joining(let attempt), .alone(_, let attempt): attempt.link?.name
        case .joined(let joined): joined.link.name
        }
    }
}
