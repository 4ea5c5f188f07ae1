import Glibc

/// Names of users and groups resolved through NSS, with the reentrant calls: the config is loaded
/// off the main thread on reload.
enum UserDatabase {
    /// The uid of user `name`, or nil if there is no such user.
    static func uid(ofUser name: String) -> UInt32? {
        withBuffer { buffer in
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            let status = getpwnam_r(name, &entry, buffer.baseAddress!, buffer.count, &result)
            return (status, result == nil ? nil : entry.pw_uid)
        }
    }

    /// The gid of group `name` and the names of its listed members, or nil if there is no such group.
    static func groupEntry(named name: String) -> (gid: UInt32, members: [String])? {
        withBuffer { buffer in
            var entry = Glibc.group()
            var result: UnsafeMutablePointer<Glibc.group>?
            let status = getgrnam_r(name, &entry, buffer.baseAddress!, buffer.count, &result)
            guard result != nil else { return (status, nil) }
            return (status, (entry.gr_gid, memberNames(of: entry)))
        }
    }

    /// The member names of the group with `gid`, or nil if no group has it.
    static func members(ofGroup gid: UInt32) -> [String]? {
        withBuffer { buffer in
            var entry = Glibc.group()
            var result: UnsafeMutablePointer<Glibc.group>?
            let status = getgrgid_r(gid, &entry, buffer.baseAddress!, buffer.count, &result)
            guard result != nil else { return (status, nil) }
            return (status, memberNames(of: entry))
        }
    }

    private static func memberNames(of entry: Glibc.group) -> [String] {
        var members: [String] = []
        var member = entry.gr_mem
        while let name = member?.pointee {
            members.append(String(cString: name))
            member = member?.advanced(by: 1)
        }
        return members
    }

    /// Calls `body` with a buffer for the NSS call, growing it while the call says ERANGE.
    private static func withBuffer<T>(_ body: (UnsafeMutableBufferPointer<CChar>) -> (Int32, T?)) -> T? {
        var size = 4096
        while size <= 1 << 24 {
            let buffer = UnsafeMutableBufferPointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let (status, value) = body(buffer)
            if status == ERANGE {
                size *= 4
                continue
            }
            return value
        }
        return nil
    }
}
