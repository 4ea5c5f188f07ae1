import CNATS

/// What ``NATSClient/ensureStream(_:)`` found.
public enum StreamSetup: Sendable, Equatable {
    /// The stream is as asked (made now, or earlier with the same settings).
    case ready
    /// It existed, made by an older feedd without the settings that keep an address's first
    /// message, and was updated in place.
    case updated
}

extension NATSClient {
    /// Makes sure the stream `configuration` exists. One made earlier with other settings is
    /// kept as it is (replicas, limits), except that it is updated to keep the first message of
    /// each subject and refuse the next ones, if `configuration` asks for that and it does not.
    public func ensureStream(_ configuration: StreamConfiguration) async throws(NATSError) -> StreamSetup {
        let operation = "create stream \"\(configuration.name)\""
        return try await perform(operation) { handles throws(NATSError) in
            try configuration.withCConfig { config throws(NATSError) in
                var serverError = jsErrCode(rawValue: 0)
                var info: UnsafeMutablePointer<jsStreamInfo>?
                let status = js_AddStream(&info, handles.jetStream, &config, nil, &serverError)
                jsStreamInfo_Destroy(info)
                if status == NATS_OK { return .ready }
                let failure = NATSError(status: status, operation: operation, serverError: serverError).whileForming
                // Another instance may have created it in between, or an older one with other settings.
                guard js_GetStreamInfo(&info, handles.jetStream, configuration.name, nil, nil) == NATS_OK, let existing = info?.pointee.Config
                else {
                    jsStreamInfo_Destroy(info)
                    throw failure
                }
                defer { jsStreamInfo_Destroy(info) }
                guard configuration.keepsFirstMessagePerSubject,
                    existing.pointee.Discard != js_DiscardNew || !existing.pointee.DiscardNewPerSubject
                else { return .ready }
                existing.pointee.Discard = js_DiscardNew
                existing.pointee.DiscardNewPerSubject = true
                existing.pointee.MaxMsgsPerSubject = Int64(configuration.maxMessagesPerSubject)
                var updated: UnsafeMutablePointer<jsStreamInfo>?
                let update = js_UpdateStream(&updated, handles.jetStream, existing, nil, &serverError)
                jsStreamInfo_Destroy(updated)
                guard update == NATS_OK else {
                    throw NATSError(status: update, operation: "update stream \"\(configuration.name)\" to keep each subject's first message", serverError: serverError)
                }
                return .updated
            }
        }
    }

    /// Opens the key-value bucket `configuration`, creating it if it does not exist yet.
    public func keyValueBucket(_ configuration: BucketConfiguration) async throws(NATSError) -> KeyValueBucket {
        let store = try await perform("open bucket \"\(configuration.name)\"") { handles throws(NATSError) in
            try configuration.open(in: handles.jetStream)
        }
        remember(bucket: store)
        return KeyValueBucket(client: self, store: store, name: configuration.name)
    }

    /// Publishes `payload` (with `headers`) on `subject` into the stream that captures it and
    /// waits for the stream's acknowledgement. `messageID` de-duplicates within the stream's
    /// duplicate window; `onlyIfSubjectIsEmpty` refuses the message, for good, when the subject
    /// already holds one (as does a stream that keeps each subject's first message, whoever publishes).
    public func publish(
        subject: String, payload: [UInt8], headers: [String: String] = [:], messageID: String, onlyIfSubjectIsEmpty: Bool
    ) async throws(NATSError) -> PublishOutcome {
        let operation = "publish on \"\(subject)\""
        return try await perform(operation) { handles throws(NATSError) in
            var options = jsPubOptions()
            jsPubOptions_Init(&options)
            options.ExpectNoMessage = onlyIfSubjectIsEmpty
            let result: Result<PublishOutcome, NATSError> = messageID.withCString { id in
                options.MsgId = id
                var acknowledgement: UnsafeMutablePointer<jsPubAck>?
                var serverError = jsErrCode(rawValue: 0)
                var message: OpaquePointer?
                var status = payload.withUnsafeBytes {
                    natsMsg_Create(&message, subject, nil, $0.baseAddress?.assumingMemoryBound(to: CChar.self), Int32($0.count))
                }
                defer { natsMsg_Destroy(message) }
                for (name, value) in headers.sorted(by: { $0.key < $1.key }) where status == NATS_OK {
                    status = natsMsgHeader_Set(message, name, value)
                }
                if status == NATS_OK { status = js_PublishMsg(&acknowledgement, handles.jetStream, message, &options, &serverError) }
                defer { jsPubAck_Destroy(acknowledgement) }
                if status == NATS_OK, let acknowledgement {
                    return .success(acknowledgement.pointee.Duplicate ? .duplicate : .stored(sequence: acknowledgement.pointee.Sequence))
                }
                let error = NATSError(status: status, operation: operation, serverError: serverError)
                // A subject that already holds a message answers "wrong last sequence" (to the
                // expectation) or "maximum messages per subject exceeded" (from a stream that
                // discards new messages per subject).
                if onlyIfSubjectIsEmpty, error.code == .conflict || error.reason.contains("maximum messages per subject") {
                    return .success(.duplicate)
                }
                return .failure(error)
            }
            return try result.get()
        }
    }

    /// The last message on `subject` in `stream`, or nil if it has none, as `freshness` asks.
    public func lastMessage(stream: String, subject: String, from freshness: Freshness) async throws(NATSError) -> Message? {
        let operation = "read the last message on \"\(subject)\" from stream \"\(stream)\""
        return try await perform(operation) { handles throws(NATSError) in
            let result: Result<Message?, NATSError> = subject.withCString { subjectPointer in
                var message: OpaquePointer?
                var serverError = jsErrCode(rawValue: 0)
                let status: natsStatus
                switch freshness {
                case .anyReplica:
                    var options = jsDirectGetMsgOptions()
                    jsDirectGetMsgOptions_Init(&options)
                    options.LastBySubject = subjectPointer
                    status = js_DirectGetMsg(&message, handles.jetStream, stream, nil, &options)
                case .leader:
                    status = js_GetLastMsg(&message, handles.jetStream, stream, subject, nil, &serverError)
                }
                defer { natsMsg_Destroy(message) }
                if status == NATS_NOT_FOUND { return .success(nil) }
                guard status == NATS_OK, let message else { return .failure(NATSError(status: status, operation: operation, serverError: serverError)) }
                return .success(Self.copy(message))
            }
            return try result.get()
        }
    }

    /// The name of the server that leads `stream` now, as JetStream reports it; nil while it has
    /// none (or on a server that is not part of a cluster).
    public func streamLeader(_ stream: String) async throws(NATSError) -> String? {
        let operation = "read the leader of stream \"\(stream)\""
        return try await perform(operation) { handles throws(NATSError) in
            var info: UnsafeMutablePointer<jsStreamInfo>?
            var serverError = jsErrCode(rawValue: 0)
            let status = js_GetStreamInfo(&info, handles.jetStream, stream, nil, &serverError)
            defer { jsStreamInfo_Destroy(info) }
            guard status == NATS_OK else { throw NATSError(status: status, operation: operation, serverError: serverError) }
            guard let leader = info?.pointee.Cluster?.pointee.Leader else { return nil }
            return String(validatingCString: leader)
        }
    }

    /// Removes every message on `subject` (wildcards allowed) from `stream`.
    public func purge(stream: String, subject: String) async throws(NATSError) {
        let operation = "purge \"\(subject)\" from stream \"\(stream)\""
        try await perform(operation) { handles throws(NATSError) in
            let status = subject.withCString { subject in
                var options = jsOptions()
                jsOptions_Init(&options)
                options.Stream.Purge.Subject = subject
                return js_PurgeStream(handles.jetStream, stream, &options, nil)
            }
            guard status == NATS_OK else { throw NATSError(status: status, operation: operation) }
        }
    }
}

/// Who may answer a read of a stream.
public enum Freshness: Sendable, Equatable {
    /// Any replica (a direct get): fast, but a replica that is cut off or catching up answers
    /// with what it has, which may miss writes the cluster already confirmed. Right only where
    /// such an answer costs nothing.
    case anyReplica
    /// The stream's leader, which confirmed every acknowledged write (nats-server answers
    /// `STREAM.MSG.GET` from the leader alone). For every read that decides something.
    case leader
}
