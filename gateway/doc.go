// Package gateway is leasegate's effect gateway as a network service
// (leasegate serve): it holds the etcd client and the provider adapters,
// with their credentials, and serves workers, approvers and operators the
// API of api/leasegate/v1 over gRPC, gRPC-Web and JSON on one port
// (connectrpc.com/connect). Its handlers are thin: they authenticate the
// caller from its client certificate, check its role and tenant, map the
// request onto coordinator, fencedtxn and ledger, and map the answer back.
// It keeps no state between calls but etcd's: any replica serves any call.
//
// # Guarantees
//
//   - Identity comes from the client certificate only (a URI SAN
//     spiffe://<trust-domain>/<path>, the certificate's only URI SAN; else
//     the CN, not in SPIFFE form). A worker claims only
//     under its identity as owner label, and commits, dispatches, releases
//     and reconciles only with grants naming it; an approval records the
//     approver's identity, never a request field. No certificate is
//     unauthenticated, a wrong role or tenant permission_denied, and nothing
//     is written in either case. An identity is never both worker and
//     approver.
//   - Health, reflection and /metrics hold a caller without a certificate
//     to the same message limit (gzip decompressed included), and the
//     metrics' labels are bounded by the API whatever paths callers send.
//   - A session's lease is renewed only in answer to its worker's own
//     renewal (RenewSession, or a KeepAlive message): a worker that stops
//     talking loses its lease at its TTL, as in-process. Each renewal answer
//     carries the deadline computed from when the keepalive was sent to etcd.
//   - A session token binds a lease to the identity it was opened for
//     (HMAC with the replicas' shared session key): another identity cannot
//     renew, claim under or close it.
//   - Dispatch is not tied to the call's context: once the gateway has the
//     request, the claim, the provider call and the recording of its answer
//     finish even if the worker disconnects, pauses or dies. A replica killed
//     mid-call leaves the record DISPATCHING, settled by the next owner's
//     Reconcile through any replica.
//   - Every disposition maps to one code (Code), with the disposition,
//     detail and hint in a Refusal error detail; etcd unreachable is
//     Unavailable (a hold), a lost etcd answer outcome_unknown.
//   - A configuration (LoadConfig, Config.NewAdapters) is checked whole
//     before anything is served: unknown fields, adapter types and kinds
//     (one adapter per kind), and each reference adapter's settings by its
//     constructor — addresses that resolve, keys, credential files that
//     are readable and private to owner and group. A fault is
//     invalid_input naming the field.
//   - Each adapter's provider is shown in grpc.health.v1 under
//     AdapterHealthService(kind), probed without changing anything; the
//     server's own services stay SERVING while a provider is down.
//
// # Non-guarantees
//
//   - Health, reflection and /metrics need no certificate: anyone who
//     reaches the port reads the API's schema, which services and adapter
//     kinds are up, and counts by procedure and code (no tenant, task,
//     owner or lease).
//   - A provider that answers a probe may still refuse or lose the next
//     call; a provider that does not is not refused a dispatch by the
//     health service (each dispatch decides for itself).
//   - A worker that holds provider credentials of its own bypasses the
//     gateway and every fence: give workers none.
//   - The gateway cannot cancel a provider call already sent; a newer
//     epoch stops new dispatches only.
//   - A session's deadline is the server's clock; a client stops on its
//     own clock from its own send time (client.Session does), which is
//     earlier.
//   - A binary-protobuf gRPC message over the size limit is refused by the
//     transport as resource_exhausted, not invalid_argument (a JSON or
//     Connect request with a Content-Length over it is invalid_argument).
package gateway
