import ArgumentParser
import EmberStorage

/// The flags that say how to reach an `s3://` archive, shared by `emberd --archive` and
/// `ember restore --archive` / `ember archive`. Each falls back to the environment variable the
/// AWS tools read (S3Settings.resolve); a secret is read from a file, never a flag's value (it
/// would show in the process list).
public struct ArchiveS3Flags: ParsableArguments, Sendable {
    @Option(help: "s3:// archive: the store's endpoint, http(s)://host[:port] (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS's https://s3.REGION.amazonaws.com).")
    public var archiveS3Endpoint: String?

    @Option(help: "s3:// archive: the region signed for (default: $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1).")
    public var archiveS3Region: String?

    @Option(help: "s3:// archive: the access key id (default: $AWS_ACCESS_KEY_ID).")
    public var archiveS3AccessKeyId: String?

    @Option(help: "s3:// archive: a file holding the secret access key (default: $AWS_SECRET_ACCESS_KEY; a session token: $AWS_SESSION_TOKEN).")
    public var archiveS3SecretAccessKeyFile: String?

    @Option(help: "s3:// archive: path (endpoint/bucket/key) or virtual (bucket.endpoint/key) addressing (default: path with an endpoint, virtual on AWS).")
    public var archiveS3Addressing: String?

    public init() {}

    /// The archive at `location`: a directory, or `s3://bucket/prefix`.
    public func open(_ location: String, create: Bool, partBytes: Int? = nil) throws -> any ArchiveStore {
        guard location.hasPrefix(S3Location.scheme) else {
            return try DirectoryArchiveStore(directory: location, create: create)
        }
        let settings = try S3Settings.resolve(endpoint: archiveS3Endpoint, region: archiveS3Region, accessKeyID: archiveS3AccessKeyId,
                                              secretAccessKeyFile: archiveS3SecretAccessKeyFile, addressing: archiveS3Addressing,
                                              partBytes: partBytes)
        return S3ArchiveStore(location: try S3Location.parse(location), settings: settings)
    }
}
