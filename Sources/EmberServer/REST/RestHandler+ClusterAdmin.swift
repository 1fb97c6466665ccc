import EmberCore
import EmberRaft
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Cluster administration over REST (admin credential required):
///
///   POST   /.ember/members          {"id": "n4", "address": "host:peerPort", "clientURL": "http://...",
///                                     "learner": true}   (learner: a non-voting member; default false)
///   POST   /.ember/members/ID/promote   a caught-up learner becomes a voter (409 while it is behind)
///   POST   /.ember/members/ID/demote    a voter becomes a learner
///   DELETE /.ember/members/ID
///   POST   /.ember/leader/transfer  {"to": "n2"}
///
/// Any member answers: a follower forwards to the leader. 200 once the change is committed (or
/// the named node leads); 400 bad body, 401/403 credential, 404 unknown member, 409 a change or
/// transfer is pending / already a member, 503 no leader or no answer in time.
extension RestHandler {
    /// Largest admin request body (a node id, an address and a URL).
    static let maxAdminBodyBytes = 4_096

    static func isClusterAdmin(_ name: String) -> Bool {
        name == "members" || name.hasPrefix("members/") || name == "leader/transfer"
    }

    func clusterAdmin(_ name: String, method: HTTPRequest.Method, request: Request, req: RestRequest,
                      channel: (any Channel)?, base: Identity = .anonymous) async throws -> Response {
        try authorizeAdmin(request: request, req: req, channel: channel, base: base)
        guard let cluster = store.admin.cluster else {
            throw RestError(404, "This node is not part of a cluster")
        }
        let operation: ClusterAdminOperation
        switch (name, method) {
        case ("members", .post):
            let body = try await adminBody(request)
            guard case .string(let id)? = body["id"], ClusterConfiguration.isValidNodeID(id) else {
                throw RestError.badRequest("\"id\" must be a node id (letters, digits, '-', '.'; at most 63 bytes)")
            }
            guard case .string(let addressText)? = body["address"], let address = PeerAddress(addressText) else {
                throw RestError.badRequest("\"address\" must be the new node's peer address, host:port")
            }
            var url: String?
            switch body["clientURL"] {
            case nil, .null?: break
            case .string(let u)? where (u.hasPrefix("http://") || u.hasPrefix("https://"))
                && u.utf8.count <= MemberDirectory.maxURLBytes:
                url = u
            default:
                throw RestError.badRequest("\"clientURL\" must be an http(s) URL of at most \(MemberDirectory.maxURLBytes) bytes")
            }
            let learner: Bool
            switch body["learner"] {
            case nil, .null?, .bool(false)?: learner = false
            case .bool(true)?: learner = true
            default: throw RestError.badRequest("\"learner\" must be true or false")
            }
            operation = learner ? .addLearner(id: id, peer: address, url: url) : .addMember(id: id, peer: address, url: url)
        case (let n, .post) where n.hasPrefix("members/") && (n.hasSuffix("/promote") || n.hasSuffix("/demote")):
            let parts = n.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 3, ClusterConfiguration.isValidNodeID(String(parts[1])) else {
                throw RestError.badRequest("Invalid node id in the URL")
            }
            let id = String(parts[1])
            operation = parts[2] == "promote" ? .promoteMember(id: id) : .demoteMember(id: id)
        case (let n, .delete) where n.hasPrefix("members/"):
            let id = String(n.dropFirst("members/".count))
            guard ClusterConfiguration.isValidNodeID(id) else { throw RestError.badRequest("Invalid node id in the URL") }
            operation = .removeMember(id: id)
        case ("leader/transfer", .post):
            let body = try await adminBody(request)
            guard case .string(let to)? = body["to"], ClusterConfiguration.isValidNodeID(to) else {
                throw RestError.badRequest("\"to\" must be the id of the member to lead")
            }
            operation = .transferLeadership(to: to)
        default:
            throw RestError(405, "Method \(method) is not supported on /.ember/\(name)")
        }
        let answer = await cluster.admin(operation)
        if answer.status >= 400, case .object(let o) = answer.body, case .string(let message)? = o["error"] {
            throw RestError(answer.status, message)
        }
        return Self.json(answer.body, pretty: false, status: HTTPResponse.Status(code: answer.status))
    }

    /// Bearer token (or `?auth=`) resolved by the node's verifier, or an admin client certificate
    /// (`base`); only `.admin` may change the cluster.
    func authorizeAdmin(request: Request, req: RestRequest, channel: (any Channel)?, base: Identity = .anonymous) throws {
        if base.isAdmin { return }
        var token = req.authToken
        if let header = request.headers[.authorization] {
            let parts = header.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else {
                throw RestError(401, "Authorization must be 'Bearer <token>'")
            }
            token = String(parts[1])
        }
        guard let token, !token.isEmpty else {
            throw RestError(401, "Cluster administration requires an admin credential (Authorization: Bearer ...)")
        }
        let identity: Identity
        do {
            identity = try policy.verify(credential: token, address: ClientCredentials.address(of: channel), now: clock())
        } catch {
            throw RestError(401, error.message)
        }
        guard identity.isAdmin else { throw RestError(403, "Cluster administration requires an admin credential") }
    }

    private func adminBody(_ request: Request) async throws -> KeyMap<JSON> {
        var body = request.body
        let data = try await Self.collect(&body, contentLength: request.headers[.contentLength], limit: Self.maxAdminBodyBytes)
        guard let json = try? JSON.parse(data.readableBytesView), case .object(let o) = json else {
            throw RestError.badRequest("The body must be a JSON object")
        }
        return o
    }
}
