import Testing

@testable import FeedServer

/// Who may connect, from ids the config resolved when it loaded (issue 14).
@Suite struct AccessPolicyTests {
    func peer(uid: UInt32, gid: UInt32) -> PeerCredentials { PeerCredentials(pid: 1, uid: uid, gid: gid) }

    @Test func empty_lists_let_everyone_in() {
        let policy = AccessPolicy(uids: [], gids: [], groupMembers: [])
        #expect(policy.isOpen && policy.allows(peer(uid: 1234, gid: 1234)))
    }

    @Test func listed_users_primary_groups_and_group_members_get_in_no_one_else() {
        let policy = AccessPolicy(uids: [1000], gids: [50], groupMembers: [2000])
        #expect(!policy.isOpen)
        #expect(policy.allows(peer(uid: 1000, gid: 1)))
        #expect(policy.allows(peer(uid: 3000, gid: 50)))
        #expect(policy.allows(peer(uid: 2000, gid: 1)))
        #expect(!policy.allows(peer(uid: 3000, gid: 1)))
    }

    /// A group without members still closes the door to everyone outside it.
    @Test func a_group_alone_is_not_an_open_list() {
        let policy = AccessPolicy(uids: [], gids: [50], groupMembers: [])
        #expect(!policy.isOpen && !policy.allows(peer(uid: 0, gid: 0)))
    }
}
