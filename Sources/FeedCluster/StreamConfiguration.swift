import CNATS

/// A JetStream stream as feedd wants it: file storage, limits retention.
public struct StreamConfiguration: Sendable {
    public var name: String
    public var subjects: [String]
    /// How many servers keep a copy (1, or 3 on a real cluster).
    public var replicas: Int
    /// Messages kept per subject; 1 makes the stream a "latest value per subject" table.
    public var maxMessagesPerSubject: Int
    /// How long a message id is remembered for de-duplication.
    public var duplicateWindow: Duration
    /// A subject holding its ``maxMessagesPerSubject`` refuses more, whoever publishes
    /// (discard new, per subject; nats-server 2.9 has it), instead of dropping its oldest.
    public var keepsFirstMessagePerSubject: Bool

    public init(
        name: String, subjects: [String], replicas: Int, maxMessagesPerSubject: Int, duplicateWindow: Duration,
        keepsFirstMessagePerSubject: Bool = false
    ) {
        self.name = name
        self.subjects = subjects
        self.replicas = replicas
        self.maxMessagesPerSubject = maxMessagesPerSubject
        self.duplicateWindow = duplicateWindow
        self.keepsFirstMessagePerSubject = keepsFirstMessagePerSubject
    }

    /// Calls `body` with libnats's form of this configuration, valid for the call only.
    func withCConfig<Value>(_ body: (inout jsStreamConfig) throws(NATSError) -> Value) throws(NATSError) -> Value {
        var config = jsStreamConfig()
        jsStreamConfig_Init(&config)
        config.Storage = js_FileStorage
        config.Retention = js_LimitsPolicy
        config.Replicas = Int64(replicas)
        config.MaxMsgsPerSubject = Int64(maxMessagesPerSubject)
        // Stream and bucket durations are nanoseconds, unlike libnats's options (milliseconds).
        config.Duplicates = duplicateWindow.milliseconds * 1_000_000
        // Direct gets let any replica answer a read, not only the leader (see ``Freshness``).
        config.AllowDirect = true
        if keepsFirstMessagePerSubject {
            config.Discard = js_DiscardNew
            config.DiscardNewPerSubject = true
        }
        let result: Result<Value, NATSError> = withCStrings(subjects) { subjectPointers in
            name.withCString { name in
                config.Name = name
                config.Subjects = subjectPointers
                config.SubjectsLen = Int32(subjects.count)
                do throws(NATSError) {
                    return .success(try body(&config))
                } catch {
                    return .failure(error)
                }
            }
        }
        return try result.get()
    }
}

/// A JetStream key-value bucket as feedd wants it: file storage, the latest value only.
public struct BucketConfiguration: Sendable {
    public var name: String
    public var replicas: Int
    /// Entries not written for this long are removed by the server; nil keeps them forever.
    public var maxAge: Duration?

    public init(name: String, replicas: Int, maxAge: Duration? = nil) {
        self.name = name
        self.replicas = replicas
        self.maxAge = maxAge
    }

    /// Creates the bucket, or binds to it if another instance made it first (with any settings).
    func open(in jetStream: OpaquePointer) throws(NATSError) -> UnsafeHandle {
        var config = kvConfig()
        kvConfig_Init(&config)
        config.History = 1
        config.Replicas = Int32(replicas)
        config.StorageType = js_FileStorage
        config.TTL = (maxAge?.milliseconds ?? 0) * 1_000_000
        var store: OpaquePointer?
        let status = name.withCString { name in
            config.Bucket = name
            return js_CreateKeyValue(&store, jetStream, &config)
        }
        if status == NATS_OK, let store { return UnsafeHandle(store) }
        let failure = NATSError(status: status, operation: "create bucket \"\(name)\"").whileForming
        guard js_KeyValue(&store, jetStream, name) == NATS_OK, let store else { throw failure }
        return UnsafeHandle(store)
    }
}
