import FeedKit

/// Consumers: which instance serves each (the last claim wins), and where each resumes.
///
/// Cursors never go back: an advance reads the stored cursor, keeps it if it is already at or
/// past the new position (generation first, then page), and otherwise writes expecting the
/// revision it read, retrying when another instance wrote in between. A stored cursor that is
/// not valid is neither resumed from nor kept.
extension ClusterStore {
    /// Makes this instance the one that serves `consumer` of `feed`; the instance that served it
    /// until now learns of it from ``consumerClaims()``.
    public func claimConsumer(feed: String, consumer: String) async throws(NATSError) {
        let claim = ConsumerClaim(feed: feed, consumer: consumer, instance: configuration.instance)
        let key = Self.consumerKey(feed: feed, consumer: consumer)
        _ = try await opened().consumers.put(key, value: sealed(claim.value, .claim, key: key))
    }

    /// Every consumer's latest claim, then every new one, from any instance; like
    /// ``generations()`` it keeps working across outages and repeats the latest claims after one.
    public func consumerClaims() -> AsyncStream<ConsumerClaim> {
        watchForever(\.consumers) { store, entry, bucket in
            store.record(entry, in: bucket, .claim) { value, address in ConsumerClaim.decode(key: entry.key, value: value, address: address) }
        }
    }

    /// The position `consumer` of `feed` acknowledged last, anywhere in the fleet, as the
    /// cursors' stream leader has it (so it reflects every acknowledgement the fleet confirmed).
    public func cursor(feed: String, consumer: String) async throws(NATSError) -> CursorPosition? {
        let cursors = try await opened().cursors
        guard let entry = try await cursors.entry(Self.consumerKey(feed: feed, consumer: consumer)) else { return nil }
        return try await believed(cursor: entry, of: feed, in: cursors)
    }

    /// Moves the cursor to `position` unless it is already there or further; returns the stored
    /// cursor. Durable in the cluster when this returns.
    public func advanceCursor(feed: String, consumer: String, to position: CursorPosition) async throws(NATSError) -> CursorPosition {
        let cursors = try await opened().cursors
        let key = Self.consumerKey(feed: feed, consumer: consumer)
        let value = sealed(position.value, .cursor, key: key)
        for attempt in 0..<8 {
            if attempt > 0 {
                // Each lost race means another instance moved the cursor meanwhile. Racing it again
                // at once can lose to it eight times in a row (seen under the thread sanitizer);
                // waiting 1, 2, 4 … ms lets it get ahead, past this position if it is going there.
                try? await Task.sleep(for: .milliseconds(1 << (attempt - 1)))
            }
            let entry = try await cursors.entry(key)
            // A stored cursor that is not valid is written over, or a forged one far ahead would
            // keep every later acknowledgement from being stored.
            if let entry, let stored = try await believed(cursor: entry, of: feed, in: cursors), stored >= position { return stored }
            do {
                if let entry {
                    _ = try await cursors.update(key, to: value, expecting: entry.revision)
                } else {
                    _ = try await cursors.create(key, value: value)
                }
                return position
            } catch where error.code == .conflict {}
        }
        throw NATSError(.conflict, operation: "advance cursor \"\(key)\"", reason: "the cursor kept changing")
    }

    /// The cursor in `entry`, if valid: in range, and not in a generation after the newest one
    /// believed (a refresh starts every cursor anew). Where a cursor points within its
    /// generation cannot be checked further: a page an instance served may be missing from the
    /// pages stream (its publication failed while the acknowledgement, through another stream's
    /// leader, went through), and a consumer that acknowledged it must resume after it. Only
    /// the fleet key's seal tells a cursor an instance wrote from one a NATS user wrote.
    private func believed(cursor entry: KeyValueBucket.Entry, of feed: String, in bucket: KeyValueBucket) async throws(NATSError) -> CursorPosition? {
        guard let position = record(entry, in: bucket, .cursor, { value, address in CursorPosition.decode(value, address: address) }) else { return nil }
        var newest = generationFloor.withLock { $0[feed] }
        // A refresh elsewhere this instance has not heard of yet: ask the fleet before deciding.
        if let known = newest, position.generation > known { newest = try await generation(of: feed)?.generation ?? known }
        if let newest, position.generation > newest {
            rejections.record(Rejection(.cursor, at: "\(bucket.name) \(entry.key)", "it is in generation \(position.generation), after the fleet's \(newest)"))
            return nil
        }
        return position
    }

    /// Forgets `consumer`'s cursor on `feed`.
    public func forgetCursor(feed: String, consumer: String) async throws(NATSError) {
        try await opened().cursors.delete(Self.consumerKey(feed: feed, consumer: consumer))
    }

    /// The KV key of a consumer of a feed: bytes of its name outside `[A-Za-z0-9_-]` become `=XX` (hex), as KV
    /// keys allow only a few characters and `.` separates tokens.
    static func consumerKey(feed: String, consumer: String) -> String {
        var key = "\(feed)."
        for byte in consumer.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: "-"):
                key.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                key += "=" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return key
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
