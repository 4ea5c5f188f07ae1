import FeedKit

/// Pages: the stream `feedd-<name>-pages`, one message per address, the first one for good.
extension ClusterStore {
    /// The header that carries a page's seal (with a fleet key).
    static let sealHeader = "Feedd-Mac"

    /// The subject `feedd.<name>.pages.<feed>.<generation>.<page>` of a page.
    public func subject(of page: PageAddress) -> String {
        "\(pageSubjectPrefix).\(page.key)"
    }

    /// Stores `line` as `page`, with `headers` (what the fleet needs to know about the page
    /// besides its line, see FeedFleet), unless that page was already published: the stream
    /// refuses a second publication for an address, from anyone, and the first stays.
    public func publishPage(_ page: PageAddress, line: [UInt8], headers: [String: String] = [:]) async throws(NATSError) -> PagePublication {
        _ = try await opened()
        let subject = subject(of: page)
        var headers = headers
        if let fleetKey = configuration.fleetKey {
            headers[Self.sealHeader] = fleetKey.seal(kind: "page", address: subject, Self.canonical(headers), line)
        }
        let outcome = try await client.publish(subject: subject, payload: line, headers: headers, messageID: page.key, onlyIfSubjectIsEmpty: true)
        switch outcome {
        case .stored: return .published
        case .duplicate: return .alreadyPublished
        }
    }

    /// The line of `page` as published by any instance, or nil if it was not published yet.
    public func page(_ page: PageAddress) async throws(NATSError) -> [UInt8]? {
        try await publishedPage(page)?.line
    }

    /// `page` as published, with its headers, or nil if it was not published yet or its seal
    /// does not verify. A page found is the page (the first stays), whichever replica answers;
    /// a page not found is asked of the stream's leader, since a replica behind would miss one
    /// just published and this instance would fetch it again.
    public func publishedPage(_ page: PageAddress) async throws(NATSError) -> PublishedPage? {
        guard let message = try await storedPage(page) else { return nil }
        return opened(message, as: page)
    }

    private func storedPage(_ page: PageAddress) async throws(NATSError) -> NATSClient.Message? {
        _ = try await opened()
        let subject = subject(of: page)
        if let message = try await client.lastMessage(stream: pageStream, subject: subject, from: .anyReplica) { return message }
        return try await client.lastMessage(stream: pageStream, subject: subject, from: .leader)
    }

    /// Removes the pages of an old generation of `feed` from the stream, once no instance serves
    /// it any more; nothing else ever removes a page.
    public func forgetPages(of feed: String, generation: Int) async throws(NATSError) {
        _ = try await opened()
        try await client.purge(stream: pageStream, subject: "\(pageSubjectPrefix).\(feed).\(generation).>")
    }

    /// Every page of `feed` (of every feed, if nil) published from now on, by any instance,
    /// while connected, but those whose address is not a page's or whose seal does not verify.
    /// Each call is a subscription of its own, with a thread of its own: an instance with many
    /// feeds subscribes once for all of them.
    public func pages(of feed: String?) async -> AsyncStream<PublishedPage> {
        let messages = await client.subscribe(to: "\(pageSubjectPrefix).\(feed ?? ">")\(feed == nil ? "" : ".>")")
        let prefixTokens = pageSubjectPrefix.split(separator: ".").count
        return AsyncStream { continuation in
            let forwarding = Task {
                for await message in messages {
                    let tokens = message.subject.split(separator: ".", omittingEmptySubsequences: false)
                    guard tokens.count == prefixTokens + 3, RecordLimits.isFeedName(String(tokens[prefixTokens])),
                        let generation = Int64(tokens[prefixTokens + 1]), (1...RecordLimits.maximumGeneration).contains(generation),
                        let number = Int64(tokens[prefixTokens + 2]), (1...RecordLimits.maximumPage).contains(number)
                    else {
                        rejections.record(Rejection(.page, at: message.subject, "not the subject of a page"))
                        continue
                    }
                    let page = PageAddress(feed: String(tokens[prefixTokens]), generation: Int(generation), page: Int(number))
                    if let published = opened(message, as: page) { continuation.yield(published) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in forwarding.cancel() }
        }
    }

    /// The page `message` carries, its seal checked (and taken off); nil, counted, if it fails.
    private func opened(_ message: NATSClient.Message, as page: PageAddress) -> PublishedPage? {
        var headers = message.headers.filter { !$0.key.hasPrefix("Nats-") }
        let seal = headers.removeValue(forKey: Self.sealHeader)
        if let fleetKey = configuration.fleetKey {
            guard let seal, fleetKey.verifies(Array(seal.utf8), kind: "page", address: message.subject, Self.canonical(headers), message.payload) else {
                rejections.record(Rejection(.mac, at: message.subject, seal == nil ? "the page carries no seal" : "the page's seal was not made with the fleet key"))
                return nil
            }
        }
        return PublishedPage(page: page, line: message.payload, headers: headers)
    }

    /// A page's headers as its seal covers them: sorted by name, each name and value ended by a NUL.
    private static func canonical(_ headers: [String: String]) -> [UInt8] {
        headers.filter { $0.key != sealHeader }.sorted { $0.key < $1.key }.flatMap { Array($0.key.utf8) + [0] + Array($0.value.utf8) + [0] }
    }
}
