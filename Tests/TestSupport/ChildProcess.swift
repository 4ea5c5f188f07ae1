import FeedKit
import Foundation

/// Starts child processes with pipes that no other child can inherit.
///
/// Foundation's `Pipe` is not close-on-exec, so a daemon started by one test while another test
/// reads a pipe would keep that pipe open, and the reader would never see end of file. Every
/// child a test starts goes through here: pipes are made close-on-exec under one lock that is
/// held until the child has its copies.
public enum ChildProcess {
    private static let spawnLock = Locked(())

    /// Launches `process` with its stdout and stderr going to new pipes; returns their read ends.
    public static func launch(_ process: Process) throws -> (output: FileHandle, errors: FileHandle) {
        try spawnLock.withLock { _ in
            let output = try makePipe()
            let errors = try makePipe()
            process.standardOutput = output.write
            process.standardError = errors.write
            defer {
                try? output.write.close()
                try? errors.write.close()
            }
            try process.run()
            return (output.read, errors.read)
        }
    }

    /// Runs `executable` to completion and returns its exit status and everything it printed.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws
        -> (status: Int32, output: String, errors: String)
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let (output, errors) = try launch(process)
        // Both pipes are drained at once, so a child that fills one while we read the other cannot stall.
        let errorData = Locked(Data())
        let errorsRead = DispatchGroup()
        DispatchQueue.global().async(group: errorsRead) {
            let data = errors.readDataToEndOfFile()
            errorData.withLock { $0 = data }
        }
        let outputData = output.readDataToEndOfFile()
        errorsRead.wait()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outputData, as: UTF8.self), String(decoding: errorData.withLock { $0 }, as: UTF8.self))
    }

    /// Whether process `pid` is gone: no longer there, or a zombie whose parent (whoever adopted
    /// it) has yet to reap it.
    public static func isGone(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
    }

    private static func makePipe() throws -> (read: FileHandle, write: FileHandle) {
        var descriptors: [Int32] = [0, 0]
        guard pipe(&descriptors) == 0 else { throw TestFailure("pipe: \(String(cString: strerror(errno)))") }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        // The write end is closed explicitly right after the spawn; closing it again on dealloc
        // could close an unrelated descriptor that reused the number.
        return (FileHandle(fileDescriptor: descriptors[0], closeOnDealloc: true), FileHandle(fileDescriptor: descriptors[1], closeOnDealloc: false))
    }
}
