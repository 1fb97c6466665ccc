import EmberArchiveS3
import EmberStorage
import Testing

/// SigV4 against the values AWS publishes for S3 ("Signature Calculations for the Authorization
/// Header: Transferring Payload in a Single Chunk", its examples: access key
/// AKIAIOSFODNN7EXAMPLE, bucket examplebucket, us-east-1, 20130524T000000Z).
@Suite struct SigV4Tests {
    let signer = SigV4(credentials: .init(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
                       region: "us-east-1", service: "s3")
    let date = "20130524T000000Z"
    let host = ("host", "examplebucket.s3.amazonaws.com")

    @Test func getObjectWithARange() {
        let s = signer.sign(method: "GET", path: "/test.txt", query: [],
                            headers: [host, ("range", "bytes=0-9"), ("x-amz-content-sha256", SigV4.emptyPayloadHash), ("x-amz-date", date)],
                            payloadHash: SigV4.emptyPayloadHash, amzDate: date)
        #expect(s.canonicalRequest == """
            GET
            /test.txt

            host:examplebucket.s3.amazonaws.com
            range:bytes=0-9
            x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            x-amz-date:20130524T000000Z

            host;range;x-amz-content-sha256;x-amz-date
            e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            """)
        #expect(s.stringToSign == """
            AWS4-HMAC-SHA256
            20130524T000000Z
            20130524/us-east-1/s3/aws4_request
            7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
            """)
        #expect(s.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(s.authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test func putObjectWithAnEncodedKeyAndAPayload() {
        let payload = SigV4.sha256Hex(Array("Welcome to Amazon S3.".utf8))
        #expect(payload == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let path = "/" + SigV4.uriEncode("test$file.text", keepSlash: true)
        #expect(path == "/test%24file.text")
        let s = signer.sign(method: "PUT", path: path, query: [],
                            headers: [("Date", "Fri, 24 May 2013 00:00:00 GMT"), host, ("x-amz-date", date),
                                      ("x-amz-storage-class", "REDUCED_REDUNDANCY"), ("x-amz-content-sha256", payload)],
                            payloadHash: payload, amzDate: date)
        #expect(s.signature == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    @Test func aSubresourceWithoutValue() {
        let s = signer.sign(method: "GET", path: "/", query: [("lifecycle", "")],
                            headers: [host, ("x-amz-date", date), ("x-amz-content-sha256", SigV4.emptyPayloadHash)],
                            payloadHash: SigV4.emptyPayloadHash, amzDate: date)
        #expect(s.canonicalRequest.split(separator: "\n", omittingEmptySubsequences: false)[2] == "lifecycle=")
        #expect(s.signature == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
    }

    @Test func aListingsQueryIsSortedAndEncoded() {
        let s = signer.sign(method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")],
                            headers: [host, ("x-amz-date", date), ("x-amz-content-sha256", SigV4.emptyPayloadHash)],
                            payloadHash: SigV4.emptyPayloadHash, amzDate: date)
        #expect(s.signature == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
        #expect(SigV4.canonicalQuery([("b", "x y/+="), ("a", "2"), ("a", "1")]) == "a=1&a=2&b=x%20y%2F%2B%3D")
    }

    @Test func theDateIsUTC() {
        #expect(SigV4.amzDate(1_369_353_600_000) == "20130524T000000Z")
        #expect(SigV4.amzDate(1_764_333_296_789) == "20251128T123456Z")
    }
}

@Suite struct S3PartsTests {
    @Test func locationsParseAndBadOnesAreRefused() throws {
        #expect(try S3Location.parse("s3://bkt") == S3Location(bucket: "bkt", prefix: ""))
        #expect(try S3Location.parse("s3://my.bucket-1/a/b") == S3Location(bucket: "my.bucket-1", prefix: "a/b/"))
        #expect(try S3Location.parse("s3://bkt/a/").description == "s3://bkt/a")
        for bad in ["s3://", "s3://B", "s3://UPPER", "s3://bkt/a b", "s3://bkt/a//b", "/tmp/x", "s3://bkt/%41"] {
            #expect(throws: ArchiveError.self, "\(bad)") { try S3Location.parse(bad) }
        }
    }

    @Test func settingsComeFromFlagsThenTheEnvironment() throws {
        let env = ["AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "T", "AWS_REGION": "eu-west-3"]
        let aws = try S3Settings.resolve(endpoint: nil, region: nil, accessKeyID: nil, secretAccessKeyFile: nil, addressing: nil, environment: env)
        #expect(aws.endpoint == "https://s3.eu-west-3.amazonaws.com" && aws.addressing == .virtual && aws.region == "eu-west-3")
        #expect(aws.credentials == SigV4.Credentials(accessKeyID: "AK", secretAccessKey: "SK", sessionToken: "T"))
        let own = try S3Settings.resolve(endpoint: "http://127.0.0.1:9000/", region: "r1", accessKeyID: "K2", secretAccessKeyFile: nil,
                                         addressing: nil, environment: env)
        #expect(own.endpoint == "http://127.0.0.1:9000" && own.addressing == .path && own.region == "r1" && own.credentials.accessKeyID == "K2")
        #expect(try S3Settings.resolve(endpoint: nil, region: nil, accessKeyID: nil, secretAccessKeyFile: nil, addressing: nil,
                                       environment: env.merging(["AWS_ENDPOINT_URL": "https://minio.example:9000"]) { $1 }).addressing == .path)
        #expect(throws: ArchiveError.self) {
            try S3Settings.resolve(endpoint: nil, region: nil, accessKeyID: nil, secretAccessKeyFile: nil, addressing: nil, environment: [:])
        }
        for (endpoint, addressing, part) in [("ftp://x", nil, nil), ("http://x/path", nil, nil), ("http://x", "sideways", nil),
                                             ("http://x", nil, 1 << 20)] as [(String, String?, Int?)] {
            #expect(throws: ArchiveError.self) {
                try S3Settings.resolve(endpoint: endpoint, region: nil, accessKeyID: nil, secretAccessKeyFile: nil, addressing: addressing,
                                       partBytes: part, environment: env)
            }
        }
    }

    @Test func listingsAndErrorsAreRead() {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix>
            <Contents><Key>p/seg-1.ems</Key><Size>3</Size></Contents><Contents><Key>p/a&amp;b&#x41;&#66;</Key></Contents>
            <IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken></ListBucketResult>
            """
        #expect(S3XML.values("Key", in: xml) == ["p/seg-1.ems", "p/a&bAB"])
        #expect(S3XML.value("IsTruncated", in: xml) == "true")
        #expect(S3XML.value("NextContinuationToken", in: xml) == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        #expect(S3XML.value("UploadId", in: xml) == nil)
        #expect(S3XML.unescape("a &bogus b &") == "a &bogus b &")
        #expect(S3XML.escape("\"e&t<>\"") == "&quot;e&amp;t&lt;&gt;&quot;")
    }
}
