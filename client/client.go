// Package client is the Go client of leasegate's gateway (leasegate serve):
// a worker, an approver or an operator that holds no etcd or provider
// credential of its own, only its client certificate. Its calls return the
// Go API's values (coordinator.Grant, fencedtxn.Receipt, ledger.Record) and
// its errors are *coordinator.Error with the gateway's disposition.
//
// # Guarantees
//
//   - The distinction between a hold and an unknown outcome survives the hop
//     to the gateway: a call that never left this process (no connection,
//     the TLS handshake failed, the context was done first) is
//     authority_unavailable; a write whose request left and whose answer was
//     lost is outcome_unknown — retry it with the same operation id; a read
//     that did not answer is authority_unavailable, never outcome_unknown.
//   - The gateway's own answer keeps its disposition, detail and hint
//     (from the error's Refusal detail).
//   - A Session's local deadline counts from the send time of the call that
//     granted or renewed its lease, so it is never later than the gateway's,
//     which is never later than etcd's expiry.
//
// # Non-guarantees
//
//   - A renewal is only as good as the network to the gateway: a Session
//     whose renewals do not arrive stops at its local deadline (Done closes).
//   - An error from a proxy between client and gateway carries no Refusal:
//     a write then reads as outcome_unknown if its request left.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// Client calls one gateway (or a load balancer in front of several
// replicas: any replica serves any call).
type Client struct {
	workers   leasegatev1connect.WorkerServiceClient
	approvers leasegatev1connect.ApproverServiceClient
	operators leasegatev1connect.OperatorServiceClient
	reads     reader // the service the reads go through (WithReadsAs)
	http      *http.Client
}

// reader is the reads every service serves to its own role: records and
// tasks.
type reader interface {
	GetRecord(context.Context, *leasegatev1.GetRecordRequest) (*leasegatev1.GetRecordResponse, error)
	ListRecords(context.Context, *leasegatev1.ListRecordsRequest) (*leasegatev1.ListRecordsResponse, error)
	ListTasks(context.Context, *leasegatev1.ListTasksRequest) (*leasegatev1.ListTasksResponse, error)
	GetOwnership(context.Context, *leasegatev1.GetOwnershipRequest) (*leasegatev1.GetOwnershipResponse, error)
	WatchOwnership(context.Context, *leasegatev1.WatchOwnershipRequest) (*connect.ServerStreamForClient[leasegatev1.WatchOwnershipResponse], error)
}

type options struct {
	grpc    bool
	readsAs string
}

// Option configures New.
type Option func(*options) error

// WithGRPC speaks gRPC rather than the Connect protocol, every call over
// HTTP/2 (without it, unary calls go over HTTP/1.1 and streams over HTTP/2).
func WithGRPC() Option {
	return func(o *options) error { o.grpc = true; return nil }
}

// WithReadsAs makes the reads — Record, List, Tasks, Owner and Watch — go
// through the service of role ("worker", the default; "approver" or
// "operator"): each service serves them to its own role, so a client
// holding an approver's or an operator's certificate reads records and
// tasks through its own.
func WithReadsAs(role string) Option {
	return func(o *options) error {
		switch role {
		case "worker", "approver", "operator":
			o.readsAs = role
			return nil
		}
		return fmt.Errorf("reads as %q: one of worker, approver, operator", role)
	}
}

// TLSConfig is a client TLS configuration: the CA the gateway's certificate
// chains to, and this caller's certificate and key (its identity).
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("client: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client: CA %s holds no certificate", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client: certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// New is a client of the gateway at baseURL (https://host:port).
func New(baseURL string, tlsConfig *tls.Config, opts ...Option) (*Client, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, store.NewError(store.InvalidInput, "client", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if tlsConfig == nil {
		return nil, store.NewError(store.InvalidInput, "client", "", "", "a TLS configuration is required: the gateway knows its callers by their certificates", nil)
	}
	hc := HTTPClient(tlsConfig)
	if o.grpc { // the gRPC protocol needs HTTP/2 for every call
		hc = &http.Client{Transport: newTransport(tlsConfig, true)}
	}
	return NewWithHTTPClient(baseURL, hc, opts...)
}

// maxIdleConnsPerHost is how many idle connections to the gateway a client
// keeps per transport: over HTTP/1.1 every call in flight holds one.
const maxIdleConnsPerHost = 64

// idleConnTimeout is how long the client keeps an idle connection to the
// gateway: under the gateway's own limit (gateway.IdleTimeout).
const idleConnTimeout = 90 * time.Second

// newTransport is a transport to the gateway over HTTP/2 (h2) or
// HTTP/1.1 only, with tlsConfig (the caller's certificate).
func newTransport(tlsConfig *tls.Config, h2 bool) *http.Transport {
	tr := &http.Transport{
		TLSClientConfig:     tlsConfig.Clone(),
		ForceAttemptHTTP2:   h2,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: maxIdleConnsPerHost,
		// Sooner than the gateway's gateway.IdleTimeout (5 min), so an idle
		// connection is closed by this side and never under a call.
		IdleConnTimeout: idleConnTimeout,
	}
	if !h2 {
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // never upgrade to HTTP/2
	}
	return tr
}

// splitTransport carries a Connect-protocol request whose body has a known
// length — a unary call, or a server stream's one request — over HTTP/1.1,
// and one whose body streams (client and bidi streams, which need HTTP/2)
// over HTTP/2. One call per connection at a time costs a connection per
// call in flight, but on the gateway's hot path (commit, dispatch) it
// measured faster than HTTP/2's multiplexing: net/http's HTTP/2 server and
// client hand each request between four to six goroutines and flush the
// headers and the body apart, where HTTP/1.1 reads, serves and writes a
// call in the connection's goroutine with one write each way
// (docs/performance.md, "The gateway's hop"). The certificate, so the
// identity, is the same on both.
type splitTransport struct{ h1, h2 *http.Transport }

func (t splitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	// A client request's length 0 with a body is unknown too (net/http).
	if r.ContentLength < 0 || r.ContentLength == 0 && r.Body != nil && r.Body != http.NoBody {
		return t.h2.RoundTrip(r)
	}
	return t.h1.RoundTrip(r)
}

// CloseIdleConnections closes both transports' idle connections
// (http.Client.CloseIdleConnections calls it).
func (t splitTransport) CloseIdleConnections() {
	t.h1.CloseIdleConnections()
	t.h2.CloseIdleConnections()
}

// Close closes idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// call runs one call: the trace context of ctx goes with it (W3C
// traceparent), whether its request left this process is tracked, and its
// error becomes a *coordinator.Error.
func call[Req, Resp any](ctx context.Context, op string, write bool, f func(context.Context, *Req) (*Resp, error), req *Req) (*Resp, error) {
	if err := ctx.Err(); err != nil {
		return nil, store.NewError(coordinator.AuthorityUnavailable, op, "", "", "not sent: context already done", err)
	}
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { sent.Store(true) }})
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		var info connect.CallInfo
		ctx, info = connect.NewClientContext(ctx)
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(info.RequestHeader()))
	}
	resp, err := f(ctx, req)
	if err != nil {
		return nil, classify(op, write, sent.Load(), err)
	}
	return resp, nil
}

// Error is a failed call's error: the *coordinator.Error it wraps carries
// the disposition, op, task and detail (errors.As and
// coordinator.DispositionOf see it), and Hint says what to do next as the
// gateway (or, for a call that got no answer, this client) says it — which
// is not always the disposition's own hint, written for a caller of etcd:
// a permission_denied from the gateway is about the certificate's roles,
// not etcd's auth, and an unreachable gateway is not an unreachable etcd.
type Error struct {
	err  *coordinator.Error
	hint string
}

// Error is the *coordinator.Error's message: disposition, op, task and
// detail.
func (e *Error) Error() string { return e.err.Error() }

// Unwrap is the *coordinator.Error.
func (e *Error) Unwrap() error { return e.err }

// Hint is what to do next.
func (e *Error) Hint() string { return e.hint }

// Hints of the calls that got no answer from the gateway.
const (
	hintNotSent    = "the gateway could not be reached; nothing was written; hold and retry later"
	hintReadLost   = "the gateway did not answer; a read changes nothing; hold and retry later"
	hintAnswerLost = "the request reached the gateway and its answer was lost: it may have applied; retry the same request to learn its outcome"
)

func hinted(e *coordinator.Error, hint string) error { return &Error{err: e, hint: hint} }

// classify names the outcome of a failed call, first match wins:
//  1. the gateway answered with a Refusal: its disposition;
//  2. the request never left: authority_unavailable (hold);
//  3. a read: authority_unavailable (a read changed nothing);
//  4. a write whose request left and whose answer is missing or not the
//     gateway's: outcome_unknown.
func classify(op string, write, sent bool, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			m, derr := d.Value()
			if r, ok := m.(*leasegatev1.Refusal); ok && derr == nil {
				return hinted(wire.ErrorFromRefusal(r, nil), r.GetHint())
			}
		}
	}
	switch {
	case !sent:
		return hinted(store.NewError(coordinator.AuthorityUnavailable, op, "", "", "not sent: the gateway could not be reached; nothing written; hold", err), hintNotSent)
	case !write:
		return hinted(store.NewError(coordinator.AuthorityUnavailable, op, "", "", "the gateway did not answer a read; nothing written", err), hintReadLost)
	}
	return hinted(store.NewError(coordinator.OutcomeUnknown, op, "", "", "sent to the gateway, no answer: it may have applied; retry the same operation to learn", err), hintAnswerLost)
}

// Release lets go of g, only while it is current.
func (c *Client) Release(ctx context.Context, g coordinator.Grant) error {
	_, err := call(ctx, "release", true, c.workers.Release, &leasegatev1.ReleaseRequest{Grant: wire.GrantToProto(g)})
	return err
}

// Renew renews g's lease once, if g is still its task's current grant.
func (c *Client) Renew(ctx context.Context, g coordinator.Grant) error {
	_, err := call(ctx, "renew", true, c.workers.RenewGrant, &leasegatev1.RenewGrantRequest{Grant: wire.GrantToProto(g)})
	return err
}

// Tasks lists the tasks of tenant (of every tenant, for an identity of all
// tenants), owned or not, at one revision.
func (c *Client) Tasks(ctx context.Context, tenant string) ([]coordinator.Ownership, error) {
	resp, err := call(ctx, "list", false, c.reads.ListTasks, &leasegatev1.ListTasksRequest{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	out := make([]coordinator.Ownership, 0, len(resp.GetTasks()))
	for _, p := range resp.GetTasks() {
		out = append(out, wire.OwnershipFromProto(p))
	}
	return out, nil
}

// Owner reads a task's ownership.
func (c *Client) Owner(ctx context.Context, tenant, task string) (coordinator.Ownership, error) {
	resp, err := call(ctx, "owner", false, c.reads.GetOwnership, &leasegatev1.GetOwnershipRequest{Tenant: tenant, Task: task})
	if err != nil {
		return coordinator.Ownership{}, err
	}
	return wire.OwnershipFromProto(resp.GetOwnership()), nil
}

// Commit is the protected write under g.
func (c *Client) Commit(ctx context.Context, g coordinator.Grant, in fencedtxn.Intent) (fencedtxn.Receipt, error) {
	resp, err := call(ctx, "commit", true, c.workers.Commit, &leasegatev1.CommitRequest{Grant: wire.GrantToProto(g),
		Operation: in.Operation, Value: in.Value, ExpectedVersion: in.ExpectedVersion})
	if err != nil {
		return fencedtxn.Receipt{}, err
	}
	return wire.ReceiptFromProto(resp.GetReceipt()), nil
}

// Get reads a task's protected state.
func (c *Client) Get(ctx context.Context, tenant, task string) (fencedtxn.State, error) {
	resp, err := call(ctx, "get", false, c.workers.GetState, &leasegatev1.GetStateRequest{Tenant: tenant, Task: task})
	if err != nil {
		return fencedtxn.State{}, err
	}
	return wire.StateFromProto(resp.GetState()), nil
}

// Propose records an intended effect under operation.
func (c *Client) Propose(ctx context.Context, g coordinator.Grant, operation string, e ledger.Effect, pre ledger.Observation) (ledger.Record, error) {
	return c.ProposeRequiring(ctx, g, operation, e, pre, nil)
}

// ProposeRequiring is Propose of an effect that also requires other
// adapters' worlds to look as each of requires says (ledger.Requirement):
// the gateway observes each at dispatch, after the claim, and sends
// nothing unless they still do. Take each requirement's precondition from
// ObservePrecondition of its effect.
func (c *Client) ProposeRequiring(ctx context.Context, g coordinator.Grant, operation string, e ledger.Effect, pre ledger.Observation, requires []ledger.Requirement) (ledger.Record, error) {
	resp, err := call(ctx, "propose", true, c.workers.Propose, &leasegatev1.ProposeRequest{Grant: wire.GrantToProto(g),
		Operation: operation, Effect: wire.EffectToProto(e), Precondition: wire.ObservationToProto(pre), Requires: wire.RequirementsToProto(requires)})
	if err != nil {
		return ledger.Record{}, err
	}
	return wire.RecordFromProto(resp.GetRecord()), nil
}

// ObservePrecondition reads, through the gateway's adapter for e's kind
// and so with the gateway's provider credentials, the world e depends on
// now: the observation to Propose e against (the one Dispatch revalidates).
// g must be a current grant of the caller's; nothing is written. A provider
// that cannot show its world is authority_unavailable, a hold.
func (c *Client) ObservePrecondition(ctx context.Context, g coordinator.Grant, e ledger.Effect) (ledger.Observation, error) {
	const op = "observe"
	resp, err := call(ctx, op, false, c.workers.ObservePrecondition, &leasegatev1.ObservePreconditionRequest{Grant: wire.GrantToProto(g),
		Effect: wire.EffectToProto(e)})
	if err != nil {
		return ledger.Observation{}, err
	}
	return wire.ObservationFromProto(op, resp.GetPrecondition())
}

// Dispatch sends an authorized operation to its provider through the
// gateway, which owns the dispatch once it has the request.
func (c *Client) Dispatch(ctx context.Context, g coordinator.Grant, operation string) (ledger.Record, error) {
	resp, err := call(ctx, "dispatch", true, c.workers.Dispatch, &leasegatev1.DispatchRequest{Grant: wire.GrantToProto(g), Operation: operation})
	if err != nil {
		return ledger.Record{}, err
	}
	return wire.RecordFromProto(resp.GetRecord()), nil
}

// Record reads one operation's record and journal.
func (c *Client) Record(ctx context.Context, tenant, task, operation string) (ledger.Record, []ledger.Transition, error) {
	resp, err := call(ctx, "ops show", false, c.reads.GetRecord, &leasegatev1.GetRecordRequest{Tenant: tenant, Task: task, Operation: operation})
	if err != nil {
		return ledger.Record{}, nil, err
	}
	rec := wire.RecordFromProto(resp.GetRecord())
	var js []ledger.Transition
	for _, t := range resp.GetJournal() {
		js = append(js, wire.TransitionFromProto(rec, t))
	}
	return rec, js, nil
}

// List reads the records of a task (or a tenant), optionally in one state.
func (c *Client) List(ctx context.Context, tenant, task string, state ledger.State) ([]ledger.Record, error) {
	resp, err := call(ctx, "ops list", false, c.reads.ListRecords, &leasegatev1.ListRecordsRequest{Tenant: tenant, Task: task, State: string(state)})
	if err != nil {
		return nil, err
	}
	return wire.RecordsFromProto(resp.GetRecords()), nil
}

// Reconcile settles the task's uncertain records: what a new owner runs.
func (c *Client) Reconcile(ctx context.Context, g coordinator.Grant) ([]ledger.Record, error) {
	resp, err := call(ctx, "reconcile", true, c.workers.Reconcile, &leasegatev1.ReconcileRequest{Grant: wire.GrantToProto(g)})
	if err != nil {
		return nil, err
	}
	return wire.RecordsFromProto(resp.GetRecords()), nil
}

// Authorize approves exact digests of a proposed operation (a's digests,
// policy and note). The approver recorded is this client's certificate
// identity: a.Approver and a.At are not sent.
func (c *Client) Authorize(ctx context.Context, tenant, task, operation string, a ledger.Approval) (ledger.Record, error) {
	resp, err := call(ctx, "authorize", true, c.approvers.Authorize, &leasegatev1.AuthorizeRequest{Tenant: tenant, Task: task,
		Operation: operation, ParamsDigest: a.ParamsDigest, PreconditionDigest: a.PreconditionDigest, Policy: a.Policy, Note: a.Note})
	if err != nil {
		return ledger.Record{}, err
	}
	return wire.RecordFromProto(resp.GetRecord()), nil
}

// Reject refuses a proposed or authorized operation.
func (c *Client) Reject(ctx context.Context, tenant, task, operation, reason string) (ledger.Record, error) {
	resp, err := call(ctx, "reject", true, c.approvers.Reject, &leasegatev1.RejectRequest{Tenant: tenant, Task: task, Operation: operation, Reason: reason})
	if err != nil {
		return ledger.Record{}, err
	}
	return wire.RecordFromProto(resp.GetRecord()), nil
}

// Resolve is an operator's decision on a MANUAL_REVIEW record.
func (c *Client) Resolve(ctx context.Context, tenant, task, operation string, to ledger.State, ev ledger.Evidence, why string) (ledger.Record, error) {
	resp, err := call(ctx, "resolve", true, c.operators.Resolve, &leasegatev1.ResolveRequest{Tenant: tenant, Task: task,
		Operation: operation, To: string(to), Evidence: wire.EvidenceToProto(&ev), Why: why})
	if err != nil {
		return ledger.Record{}, err
	}
	return wire.RecordFromProto(resp.GetRecord()), nil
}

// ResolveUnder is Resolve under g, the grant the operator decided under:
// refused unless g is the task's current grant (stale_owner, or
// expired_owner when nobody holds the task).
func (c *Client) ResolveUnder(ctx context.Context, g coordinator.Grant, operation string, to ledger.State, ev ledger.Evidence, why string) (ledger.Record, error) {
	resp, err := call(ctx, "resolve", true, c.operators.Resolve, &leasegatev1.ResolveRequest{Tenant: g.Tenant, Task: g.Task,
		Operation: operation, To: string(to), Evidence: wire.EvidenceToProto(&ev), Why: why, Grant: wire.GrantToProto(g)})
	if err != nil {
		return ledger.Record{}, err
	}
	return wire.RecordFromProto(resp.GetRecord()), nil
}

// RevokeLease revokes a lease carrying owner keys of the keyspace, and
// returns it as read right before the revoke (its tasks are the ones
// vacated), as Coordinator.RevokeOwnerLease does.
func (c *Client) RevokeLease(ctx context.Context, lease int64) (coordinator.LeaseInfo, error) {
	resp, err := call(ctx, "lease revoke", true, c.operators.RevokeLease, &leasegatev1.RevokeLeaseRequest{Lease: coordinator.FormatLeaseID(lease)})
	if err != nil {
		return coordinator.LeaseInfo{}, err
	}
	li := wire.LeaseInfoFromProto(resp.GetRevoked())
	li.ID = lease
	return li, nil
}

// Leases lists every lease carrying owner keys of the keyspace (an
// operator of all tenants).
func (c *Client) Leases(ctx context.Context) ([]coordinator.LeaseInfo, error) {
	resp, err := call(ctx, "lease list", false, c.operators.ListLeases, &leasegatev1.ListLeasesRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]coordinator.LeaseInfo, 0, len(resp.GetLeases()))
	for _, p := range resp.GetLeases() {
		out = append(out, wire.LeaseInfoFromProto(p))
	}
	return out, nil
}

// Lease shows one lease (an operator of every tenant it holds a task of).
func (c *Client) Lease(ctx context.Context, lease int64) (coordinator.LeaseInfo, error) {
	resp, err := call(ctx, "lease show", false, c.operators.ShowLease, &leasegatev1.ShowLeaseRequest{Lease: coordinator.FormatLeaseID(lease)})
	if err != nil {
		return coordinator.LeaseInfo{}, err
	}
	return wire.LeaseInfoFromProto(resp.GetLease()), nil
}

// ShowRealm reads the realm, its recorded origin and any restore warnings
// (the OriginCheck's Now is not carried).
func (c *Client) ShowRealm(ctx context.Context) (coordinator.OriginCheck, error) {
	resp, err := call(ctx, "realm show", false, c.operators.ShowRealm, &leasegatev1.ShowRealmRequest{})
	if err != nil {
		return coordinator.OriginCheck{}, err
	}
	return coordinator.OriginCheck{Realm: resp.GetRealm(), Origin: wire.OriginFromProto(resp.GetOrigin()), Warnings: resp.GetWarnings()}, nil
}

// RotateRealm writes a new realm.
func (c *Client) RotateRealm(ctx context.Context) (string, error) {
	resp, err := call(ctx, "realm rotate", true, c.operators.RotateRealm, &leasegatev1.RotateRealmRequest{})
	if err != nil {
		return "", err
	}
	return resp.GetRealm(), nil
}

// WatchOption configures Watch.
type WatchOption func(*watchOptions)

type watchOptions struct{ synced func() }

// WithSynced calls synced once the gateway's watch is established: every
// change after that call is streamed to f, so a caller that acts once
// synced returns (a claim) cannot miss what its action causes. The marker
// itself is not passed to f.
func WithSynced(synced func()) WatchOption {
	return func(o *watchOptions) { o.synced = synced }
}

// Watch streams ownership changes of tenant (every tenant the caller serves
// when empty) to f, the current owners first ("owned"), until ctx ends (nil),
// f returns an error (that error), or the stream breaks (a hold, or the
// gateway's refusal).
func (c *Client) Watch(ctx context.Context, tenant string, f func(coordinator.OwnershipEvent) error, opts ...WatchOption) error {
	const op = "watch"
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := ctx.Err(); err != nil {
		return store.NewError(coordinator.AuthorityUnavailable, op, "", "", "not sent: context already done", err)
	}
	stream, err := c.reads.WatchOwnership(ctx, &leasegatev1.WatchOwnershipRequest{Tenant: tenant, MarkSynced: o.synced != nil})
	if err != nil {
		return classify(op, false, true, err)
	}
	defer stream.Close()
	for stream.Receive() {
		m := stream.Msg()
		if m.GetType() == watchSynced && o.synced != nil {
			o.synced()
			continue
		}
		if err := f(coordinator.OwnershipEvent{Type: coordinator.EventType(m.GetType()), Ownership: wire.OwnershipFromProto(m.GetOwnership())}); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := stream.Err(); err != nil {
		return classify(op, false, true, err)
	}
	return hinted(store.NewError(coordinator.AuthorityUnavailable, op, "", "", "the gateway ended the watch; nothing written", nil),
		"the gateway ended the stream; nothing was written; watch again")
}

// watchSynced is the type of the gateway's watch-established marker
// (gateway.WatchSynced).
const watchSynced = "synced"
