import CNATS

/// One JetStream key-value bucket opened by a ``NATSClient``. Every call runs on the client's
/// workers and fails at once while the connection is down.
public struct KeyValueBucket: Sendable {
    /// The latest value of a key and the revision that wrote it.
    public struct Entry: Sendable, Equatable {
        public let key: String
        public let value: [UInt8]
        /// The stream sequence of this write; the compare-and-set token for ``update(_:to:expecting:)``.
        public let revision: UInt64
        /// False for a deletion, as a watch reports it (``value`` is then empty).
        public let isPresent: Bool
    }

    let client: NATSClient
    let store: UnsafeHandle
    public let name: String

    /// The key's latest value, or nil if it was never written or is deleted, as the bucket's
    /// stream leader has it. Every read of a bucket decides something (whether a lease is free,
    /// where a consumer resumes, which generation is current), so none is a direct get, which
    /// any replica answers (libnats's `kvStore_Get` uses one on buckets that allow it): a replica
    /// that is cut off or catching up would answer without writes the fleet already confirmed.
    public func entry(_ key: String) async throws(NATSError) -> Entry? {
        guard let message = try await lastMessage(of: key), !Self.isDeletion(message) else { return nil }
        return Entry(key: key, value: message.payload, revision: message.sequence, isPresent: true)
    }

    /// Writes `value` only if `key` has no value (never written, or deleted); returns the revision.
    /// Throws ``NATSError/Code/conflict`` if it has one.
    ///
    /// Not libnats's `kvStore_Create`: when the key holds a message, that one reads the key with a
    /// direct get to see whether the message is a deletion, and a replica that missed the key's
    /// writes (one cut off a moment ago and not caught up) answers "not found". That answer wipes
    /// the thread's error text, so the refusal came back as a failure without words, not as a
    /// conflict: an instance on that replica's server could acquire no lease that any instance
    /// held before, took the fleet for unreachable and served alone, over and over, fetching the
    /// first page of a new local generation every second after the cluster had healed.
    public func create(_ key: String, value: [UInt8]) async throws(NATSError) -> UInt64 {
        do {
            // Revision 0: the stream must hold no message for the key at all.
            return try await update(key, to: value, expecting: 0, action: "create")
        } catch where error.code == .conflict {
            // A deleted key still holds its deletion, which the stream's leader tells.
            guard let last = try await lastMessage(of: key), Self.isDeletion(last) else { throw error }
            return try await update(key, to: value, expecting: last.sequence, action: "create")
        }
    }

    /// Writes `value` only if `revision` is still the key's latest; returns the new revision.
    /// Throws ``NATSError/Code/conflict`` if another write came first.
    public func update(_ key: String, to value: [UInt8], expecting revision: UInt64) async throws(NATSError) -> UInt64 {
        try await update(key, to: value, expecting: revision, action: "update")
    }

    /// `kvStore_Update`, which with revision 0 expects no message for the key at all.
    private func update(_ key: String, to value: [UInt8], expecting revision: UInt64, action: String) async throws(NATSError) -> UInt64 {
        try await write(action, key, value) { kvStore_Update($0, $1, key, $2, $3, revision) }
    }

    /// The key's last message, a deletion or a value, as the bucket's stream leader has it.
    private func lastMessage(of key: String) async throws(NATSError) -> NATSClient.Message? {
        try await client.lastMessage(stream: "KV_\(name)", subject: "$KV.\(name).\(key)", from: .leader)
    }

    /// Whether `message` deletes its key (a deletion is a message too, marked by its header).
    private static func isDeletion(_ message: NATSClient.Message) -> Bool {
        let operation = message.headers["KV-Operation"]
        return operation == "DEL" || operation == "PURGE"
    }

    /// Writes `value` whatever the key held; returns the new revision.
    public func put(_ key: String, value: [UInt8]) async throws(NATSError) -> UInt64 {
        try await write("put", key, value) { kvStore_Put($0, $1, key, $2, $3) }
    }

    /// Runs one of libnats's writes, `call(revision, store, bytes, count)`, on the workers.
    private func write(
        _ action: String, _ key: String, _ value: [UInt8],
        _ call: @escaping @Sendable (UnsafeMutablePointer<UInt64>, OpaquePointer, UnsafeRawPointer?, Int32) -> natsStatus
    ) async throws(NATSError) -> UInt64 {
        let operation = describe(action, key)
        return try await client.perform(operation) { [store] _ throws(NATSError) in
            var revision: UInt64 = 0
            let status = value.withUnsafeBytes { bytes in
                withUnsafeMutablePointer(to: &revision) { call($0, store.pointer, bytes.baseAddress, Int32(bytes.count)) }
            }
            guard status == NATS_OK else { throw NATSError(status: status, operation: operation) }
            return revision
        }
    }

    /// Deletes `key`'s value (a watch sees the deletion).
    public func delete(_ key: String) async throws(NATSError) {
        let operation = describe("delete", key)
        try await client.perform(operation) { [store] _ throws(NATSError) in
            let status = kvStore_Delete(store.pointer, key)
            guard status == NATS_OK else { throw NATSError(status: status, operation: operation) }
        }
    }

    /// The latest entry of every key matching `keys` (`>` for all), then every later write, for
    /// as long as the stream is iterated. After a reconnection the latest entries come again, so
    /// nothing written during the outage is missed.
    public func watch(_ keys: String) async -> AsyncStream<Entry> {
        let operation = describe("watch", keys)
        let source = BlockingSource<Entry>(
            reopenAfterReconnect: true,
            open: { [store] () throws(NATSError) -> UnsafeHandle in
                var watcher: OpaquePointer?
                let status = kvStore_Watch(&watcher, store.pointer, keys, nil)
                guard status == NATS_OK, let watcher else { throw NATSError(status: status, operation: operation) }
                return UnsafeHandle(watcher)
            },
            next: { watcher in
                var entry: OpaquePointer?
                let status = kvWatcher_Next(&entry, watcher.pointer, StreamPump.pollMilliseconds)
                defer { kvEntry_Destroy(entry) }
                switch status {
                // A NULL entry marks the end of the initial values.
                case NATS_OK: return entry.map { .element(Self.entry(copying: $0)) } ?? .idle
                case NATS_TIMEOUT: return .idle
                default: return .broken
                }
            },
            close: { kvWatcher_Destroy($0.pointer) })
        return await client.stream(named: "feedd-nats-watch", from: source)
    }

    private func describe(_ action: String, _ key: String) -> String {
        "\(action) key \"\(key)\" in bucket \"\(name)\""
    }

    /// Copies the entry out of libnats, whose memory is freed with the entry.
    private static func entry(copying entry: OpaquePointer) -> Entry {
        let length = Int(kvEntry_ValueLen(entry))
        var value: [UInt8] = []
        if length > 0, let bytes = kvEntry_Value(entry) {
            value = Array(UnsafeRawBufferPointer(start: bytes, count: length))
        }
        return Entry(
            key: String(cString: kvEntry_Key(entry)), value: value, revision: kvEntry_Revision(entry),
            isPresent: kvEntry_Operation(entry) == kvOp_Put)
    }
}
