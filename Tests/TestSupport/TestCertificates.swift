import Foundation

/// Certificates for a test's TLS, made with Debian's `openssl` in a temporary directory: a CA,
/// a server certificate it signs for 127.0.0.1 and localhost, a client certificate it signs, and
/// a second CA that signs a client certificate the first does not trust.
public final class TestCertificates: Sendable {
    public let directory: TemporaryDirectory

    public var authority: String { directory.path("ca.pem") }
    public var serverCertificate: String { directory.path("server.pem") }
    public var serverKey: String { directory.path("server-key.pem") }
    public var clientCertificate: String { directory.path("client.pem") }
    public var clientKey: String { directory.path("client-key.pem") }
    /// A CA the servers do not trust, and a client certificate it signed.
    public var strangerAuthority: String { directory.path("stranger-ca.pem") }
    public var strangerCertificate: String { directory.path("stranger.pem") }
    public var strangerKey: String { directory.path("stranger-key.pem") }

    public init() throws {
        directory = try TemporaryDirectory()
        try authority(named: "ca")
        try authority(named: "stranger-ca")
        try issue("server", by: "ca", subjectAlternativeNames: "IP:127.0.0.1,DNS:localhost", usage: "serverAuth")
        try issue("client", by: "ca", subjectAlternativeNames: "DNS:feedd-client", usage: "clientAuth")
        try issue("stranger", by: "stranger-ca", subjectAlternativeNames: "DNS:stranger", usage: "clientAuth")
    }

    private func authority(named name: String) throws {
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=feedd test \(name)", "-keyout", directory.path("\(name)-key.pem"), "-out", directory.path("\(name).pem"),
        ])
    }

    private func issue(_ name: String, by issuer: String, subjectAlternativeNames: String, usage: String) throws {
        let extensions = try directory.write("\(name).ext", "subjectAltName = \(subjectAlternativeNames)\nextendedKeyUsage = \(usage)\n")
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=\(name)",
            "-keyout", directory.path("\(name)-key.pem"), "-out", directory.path("\(name).csr"),
        ])
        try openssl([
            "x509", "-req", "-in", directory.path("\(name).csr"), "-CA", directory.path("\(issuer).pem"), "-CAkey", directory.path("\(issuer)-key.pem"),
            "-CAcreateserial", "-days", "2", "-extfile", extensions, "-out", directory.path("\(name).pem"),
        ])
    }

    private func openssl(_ arguments: [String]) throws {
        let (status, _, errors) = try ChildProcess.run("/usr/bin/openssl", arguments)
        guard status == 0 else { throw TestFailure("openssl \(arguments.first ?? "") failed: \(errors)") }
    }
}
