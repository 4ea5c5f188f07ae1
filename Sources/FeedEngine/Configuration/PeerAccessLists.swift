import FeedKit

/// `allow_uids` and `allow_groups`: ids and names, every name resolved through the user database
/// when the config is loaded, so admitting a client never reads it. A name that does not
/// resolve is an error: skipping it could leave the list empty, and an empty list lets everyone in.
enum PeerAccessLists {
    /// `allow_uids`: uids and user names.
    static func users(_ table: ConfigTable) throws(OptionError) -> [UInt32] {
        var uids: [UInt32] = []
        for entry in try entries(table, "allow_uids", what: "user") {
            switch entry {
            case .id(let uid): uids.append(uid)
            case .name(let name):
                guard let uid = UserDatabase.uid(ofUser: name) else { throw table.invalid("allow_uids", "no user named \"\(name)\" on this host") }
                uids.append(uid)
            }
        }
        return uids
    }

    /// `allow_groups`: gids and group names, with the uids of the groups' listed members.
    static func groups(_ table: ConfigTable) throws(OptionError) -> (gids: [UInt32], memberUIDs: [UInt32]) {
        var gids: [UInt32] = []
        var memberNames: [String] = []
        for entry in try entries(table, "allow_groups", what: "group") {
            switch entry {
            case .id(let gid):
                gids.append(gid)
                memberNames += UserDatabase.members(ofGroup: gid) ?? []
            case .name(let name):
                guard let group = UserDatabase.groupEntry(named: name) else {
                    throw table.invalid("allow_groups", "no group named \"\(name)\" on this host")
                }
                gids.append(group.gid)
                memberNames += group.members
            }
        }
        return (gids, memberNames.compactMap(UserDatabase.uid(ofUser:)))
    }

    private enum Entry {
        case id(UInt32)
        case name(String)
    }

    private static func entries(_ table: ConfigTable, _ key: String, what: String) throws(OptionError) -> [Entry] {
        guard let value = table.value(key) else { return [] }
        let expected = "expected an array of \(what) ids (whole numbers) or \(what) names (strings)"
        guard let elements = value.arrayValue else { throw table.invalid(key, "\(expected), got \(value.typeDescription)") }
        var entries: [Entry] = []
        for element in elements {
            switch element {
            case .integer(let id):
                guard let id = UInt32(exactly: id), id != UInt32.max else { throw table.invalid(key, "\(id) is not a \(what) id") }
                entries.append(.id(id))
            case .string(let name) where !name.isEmpty:
                entries.append(.name(name))
            default:
                throw table.invalid(key, "\(expected), got \(element.typeDescription)")
            }
        }
        return entries
    }
}
