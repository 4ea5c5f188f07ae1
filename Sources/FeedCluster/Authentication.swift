import CNATS
import Foundation

extension NATSClient {
    /// How the client proves who it is to the servers: one of the ways NATS has. Every secret is
    /// read from a file, and no secret is ever part of a description, an error or a log line.
    public enum Authentication: Sendable, Equatable {
        /// Nothing (or the `user:password@` of a server URL).
        case none
        /// `user` with the password held in `passwordFile`.
        case password(user: String, passwordFile: String)
        /// The token held in `file`.
        case token(file: String)
        /// The NKey seed (`SU…`) held in `file`; the public key is derived from it.
        case nkeySeed(file: String)
        /// A credentials file: a user JWT and its NKey seed (operator mode).
        case credentials(file: String)
    }

    /// TLS beyond what a `tls://` URL asks for: whom to trust, and a client certificate.
    public struct TLSFiles: Sendable, Equatable {
        /// PEM file of the certificate authorities that sign the servers' certificates.
        public var trustedCertificates: String?
        /// PEM file of this client's certificate (and its chain), for servers that verify clients.
        public var certificate: String?
        /// PEM file of the certificate's private key.
        public var privateKey: String?

        public init(trustedCertificates: String? = nil, certificate: String? = nil, privateKey: String? = nil) {
            self.trustedCertificates = trustedCertificates
            self.certificate = certificate
            self.privateKey = privateKey
        }

        var isEmpty: Bool { trustedCertificates == nil && certificate == nil && privateKey == nil }
    }
}

/// The secrets of ``NATSClient/Authentication``, read once when the client is made, so that an
/// unreadable file is reported at once (libnats would retry it forever without a word).
struct ConnectionSecrets: Sendable {
    enum Identity: Sendable {
        case none
        case password(user: String, password: String)
        case token(String)
        case nkey(publicKey: String, seedFile: String)
        case credentials(file: String)
    }

    let identity: Identity
    let tls: NATSClient.TLSFiles

    static func read(_ options: NATSClient.Options) throws(NATSError) -> ConnectionSecrets {
        let identity: Identity
        switch options.authentication {
        case .none: identity = .none
        case .password(let user, let file): identity = .password(user: user, password: try secret(in: file, "password"))
        case .token(let file): identity = .token(try secret(in: file, "token"))
        case .nkeySeed(let file):
            guard let seed = NKey(seedText: try secret(in: file, "NKey seed")), seed.role == .user else {
                throw NATSError(.failed, operation: "read the NKey seed file \(file)", reason: "it holds no user NKey seed (SU…, as `nk -gen user` makes)")
            }
            identity = .nkey(publicKey: seed.publicKey, seedFile: file)
        case .credentials(let file):
            try checkReadable(file, "credentials")
            identity = .credentials(file: file)
        }
        let tls = options.tls
        for (file, what) in [(tls.trustedCertificates, "TLS CA"), (tls.certificate, "TLS certificate"), (tls.privateKey, "TLS key")] {
            if let file { try checkReadable(file, what) }
        }
        return ConnectionSecrets(identity: identity, tls: tls)
    }

    /// Sets these secrets on libnats's `options`.
    func apply(to options: OpaquePointer) -> natsStatus {
        var status = NATS_OK
        switch identity {
        case .none: break
        case .password(let user, let password): status = natsOptions_SetUserInfo(options, user, password)
        case .token(let token): status = natsOptions_SetToken(options, token)
        case .nkey(let publicKey, let seedFile): status = natsOptions_SetNKeyFromSeed(options, publicKey, seedFile)
        case .credentials(let file): status = natsOptions_SetUserCredentialsFromFiles(options, file, nil)
        }
        if status == NATS_OK, let authorities = tls.trustedCertificates { status = natsOptions_LoadCATrustedCertificates(options, authorities) }
        if status == NATS_OK, let certificate = tls.certificate, let key = tls.privateKey {
            status = natsOptions_LoadCertificatesChain(options, certificate, key)
        }
        return status
    }

    /// The file's text without the line break an editor leaves at its end.
    private static func secret(in file: String, _ what: String) throws(NATSError) -> String {
        let secret = try text(of: file, what).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !secret.isEmpty else { throw NATSError(.failed, operation: "read the \(what) file \(file)", reason: "it is empty") }
        return secret
    }

    /// The whole text of `file`; an error says why it cannot be read, in the system's words.
    static func text(of file: String, _ what: String) throws(NATSError) -> String {
        try checkReadable(file, what)
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw NATSError(.failed, operation: "read the \(what) file \(file)", reason: "it is not UTF-8 text")
        }
        return text
    }

    private static func checkReadable(_ file: String, _ what: String) throws(NATSError) {
        guard access(file, R_OK) != 0 else { return }
        throw NATSError(.failed, operation: "read the \(what) file \(file)", reason: String(cString: strerror(errno)))
    }
}

extension NATSClient {
    /// `url` without the `user:password@` it may carry, for logs and error messages.
    public static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://"), let at = url[schemeEnd.upperBound...].lastIndex(of: "@") else { return url }
        return String(url[..<schemeEnd.upperBound]) + String(url[url.index(after: at)...])
    }
}
