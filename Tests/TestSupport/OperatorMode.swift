import FeedCluster
import Foundation

/// NATS operator mode for a test (decentralised JWT authentication): an operator, one account
/// with JetStream, and a user of it, each with a new NKey, and the JWTs that bind them, signed
/// as `nsc` signs them. ``serverConfiguration`` makes a server trust the operator (the account
/// preloaded in a memory resolver); ``credentials`` is the user's credentials file.
public struct OperatorMode: Sendable {
    public let serverConfiguration: String
    /// A credentials file's text: the user's JWT and NKey seed.
    public let credentials: String
    /// The credentials of a user of an account the servers do not know.
    public let strangerCredentials: String

    public init() {
        let operatorKey = NKey.generate(.operator)
        let account = NKey.generate(.account)
        // JetStream in operator mode needs a system account.
        let system = NKey.generate(.account)
        let user = NKey.generate(.user)
        let operatorJWT = Self.jwt(
            by: operatorKey, subject: operatorKey.publicKey, name: "feedd-test",
            nats: #"{"type":"operator","version":2}"#)
        let accountJWT = Self.jwt(
            by: operatorKey, subject: account.publicKey, name: "FEEDD",
            nats: #"{"limits":{"subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,"wildcards":true,"conn":-1,"leaf":-1,"# +
                #""mem_storage":-1,"disk_storage":-1,"streams":-1,"consumer":-1},"type":"account","version":2}"#)
        let systemJWT = Self.jwt(by: operatorKey, subject: system.publicKey, name: "SYS", nats: #"{"type":"account","version":2}"#)
        serverConfiguration = """
            operator: "\(operatorJWT)"
            system_account: \(system.publicKey)
            resolver: MEMORY
            resolver_preload: { \(account.publicKey): "\(accountJWT)", \(system.publicKey): "\(systemJWT)" }
            """
        credentials = Self.credentials(for: user, of: account)
        strangerCredentials = Self.credentials(for: NKey.generate(.user), of: NKey.generate(.account))
    }

    private static func credentials(for user: NKey, of account: NKey) -> String {
        let userJWT = jwt(by: account, subject: user.publicKey, name: "feedd", nats: #"{"pub":{},"sub":{},"subs":-1,"data":-1,"payload":-1,"type":"user","version":2}"#)
        return """
            -----BEGIN NATS USER JWT-----
            \(userJWT)
            ------END NATS USER JWT------

            -----BEGIN USER NKEY SEED-----
            \(user.seedText)
            ------END USER NKEY SEED------

            """
    }

    /// A JWT (version 2): header and claims in Base64URL, signed by `issuer`.
    private static func jwt(by issuer: NKey, subject: String, name: String, nats: String) -> String {
        let identifier = NKey.generate(.user).publicKey.dropFirst()
        let claims = #"{"jti":"\#(identifier)","iat":\#(Int(Date().timeIntervalSince1970)),"iss":"\#(issuer.publicKey)","name":"\#(name)","sub":"\#(subject)","nats":\#(nats)}"#
        let signed = base64URL(Array(#"{"typ":"JWT","alg":"ed25519-nkey"}"#.utf8)) + "." + base64URL(Array(claims.utf8))
        return signed + "." + base64URL(issuer.sign(Array(signed.utf8)))
    }

    private static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
