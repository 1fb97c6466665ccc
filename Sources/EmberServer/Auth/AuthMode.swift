/// How a node judges credentials, chosen at startup the way Redis chooses protected mode: a node
/// without auth configured only serves this machine, unless the operator says it is for development.
public enum AuthMode: Sendable, Equatable {
    /// Loopback only, no keys: the emulator's conveniences (`owner` is admin, unsigned JWTs are
    /// read for their claims). The README quick start and deploy/local-cluster run this way.
    case protected
    /// Keys, an admin token or trusted owner addresses configured: signatures are checked.
    case verified
    /// `--dev` on a non-loopback address without auth: protected mode's rules for anyone who
    /// can reach the node.
    case development

    /// The mode for a listen address and configuration, or the one-line reason to refuse to start.
    public static func choose(host: String, authConfigured: Bool, dev: Bool) -> Result<AuthMode, AuthSetupError> {
        if authConfigured { return .success(.verified) }
        if ListenAddress.isLoopback(host) { return .success(.protected) }
        if dev { return .success(.development) }
        return .failure(AuthSetupError(
            "refusing to listen on \(host) without auth: give --auth-hs256-secret-file, --auth-jwks-file or --admin-token-file, listen on 127.0.0.1, or pass --dev to accept unsigned tokens from the network"))
    }

    /// What the node logs at startup.
    public var summary: String {
        switch self {
        case .protected: return "protected mode: loopback only, emulator tokens (owner is admin, unsigned JWTs accepted)"
        case .verified: return "verified tokens: signed JWTs only; owner is admin only from --trust-owner-from"
        case .development: return "DEVELOPMENT mode on a network address: unsigned tokens accepted and owner is admin for anyone who can connect"
        }
    }
}
