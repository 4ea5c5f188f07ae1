import FeedKit

/// Fetch leases: one instance at a time fetches a page (or looks whether a polled source has it).
///
/// The expiry lives in the value and every change is a compare-and-set on the key's revision:
/// acquire = create; a lease that expired, was released (`expires_ms` 0) or is not valid is
/// taken over by an update expecting the revision just read, so of several instances taking
/// over at once exactly one wins. Renew and release expect the holder's own revision, so an
/// instance whose lease was taken over can neither extend nor cancel its successor's.
extension ClusterStore {
    /// Tries to become the one instance that fetches `page` (or, for `.look`, that looks
    /// whether a polled source has it yet).
    public func acquireLease(_ page: PageAddress, for purpose: LeasePurpose = .fetch) async throws(NATSError) -> LeaseOutcome {
        let leases = try await opened().leases
        let key = FeedLease.key(of: page, for: purpose)
        // Each round either wins or learns a newer revision; a few rounds cover any realistic race.
        for _ in 0..<4 {
            let lease = FeedLease(
                page: page, purpose: purpose, holder: configuration.instance, expires: Self.now + configuration.lease.milliseconds, revision: 0)
            do {
                return .acquired(lease.with(revision: try await leases.create(key, value: sealed(lease.value, .lease, key: key))))
            } catch where error.code == .conflict {}
            guard let entry = try await leases.entry(key) else { continue }
            // A lease that is not valid (a forged expiry far in the future, say) holds nothing.
            let current = believed(lease: entry, of: page, for: purpose, in: leases)
            if let current, current.holder != configuration.instance, current.expires > Self.now {
                return .heldElsewhere(holder: current.holder, untilUnixMilliseconds: current.expires)
            }
            do {
                return .acquired(lease.with(revision: try await leases.update(key, to: sealed(lease.value, .lease, key: key), expecting: entry.revision)))
            } catch where error.code == .conflict {}
        }
        throw NATSError(.conflict, operation: "acquire lease \"\(key)\"", reason: "the lease kept changing hands")
    }

    /// The lease in `entry`, if valid: no instance writes an expiry later than its `lease` from now.
    private func believed(lease entry: KeyValueBucket.Entry, of page: PageAddress, for purpose: LeasePurpose, in bucket: KeyValueBucket) -> FeedLease? {
        let latestExpiry = Self.now + (configuration.lease + Self.clockSkewAllowance).milliseconds
        return record(entry, in: bucket, .lease) { value, address in
            FeedLease.decode(page: page, purpose: purpose, value: value, revision: entry.revision, latestExpiry: latestExpiry, address: address)
        }
    }

    /// Extends `lease` by the configured length from now. Throws ``NATSError/Code/conflict`` if
    /// it expired and another instance took it over: stop fetching, that one will publish.
    public func renewLease(_ lease: FeedLease) async throws(NATSError) -> FeedLease {
        let renewed = lease.until(Self.now + configuration.lease.milliseconds)
        let revision = try await opened().leases.update(lease.key, to: sealed(renewed.value, .lease, key: lease.key), expecting: lease.revision)
        return renewed.with(revision: revision)
    }

    /// Gives `lease` up so another instance may take it at once; a no-op if it was taken over.
    public func releaseLease(_ lease: FeedLease) async throws(NATSError) {
        do {
            let released = lease.until(0)
            _ = try await opened().leases.update(lease.key, to: sealed(released.value, .lease, key: lease.key), expecting: lease.revision)
        } catch where error.code == .conflict {}
    }
}
