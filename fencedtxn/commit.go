package fencedtxn

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/digest"
	"github.com/leasegate/leasegate/internal/store"
)

// DefaultMaxValueBytes is the largest Intent.Value Commit accepts unless
// WithMaxValueBytes says otherwise.
const DefaultMaxValueBytes = 256 << 10

// MaxValueBytesLimit bounds WithMaxValueBytes: the value travels in one Txn
// with the operation record, under etcd's default 1.5 MiB request limit.
const MaxValueBytesLimit = 1 << 20

// Intent is one protected write: which task, which operation (its stable
// identity across retries and owners), the new value, and the state version
// it was decided against. It never contains the epoch. Value is bytes, as
// stored (State.Value): any binary value round-trips unchanged.
type Intent struct {
	Tenant          string `json:"tenant"`
	Task            string `json:"task"`
	Operation       string `json:"operation"`
	Value           []byte `json:"value"`
	ExpectedVersion int64  `json:"expected_version"`
}

// Receipt is what a committed operation returns, the first time and on
// every retry. Epoch and Revision are those of the original commit.
type Receipt struct {
	Disposition      coordinator.Disposition `json:"disposition"`
	Tenant           string                  `json:"tenant"`
	Task             string                  `json:"task"`
	Operation        string                  `json:"operation"`
	CommittedVersion int64                   `json:"committed_version"`
	Epoch            int64                   `json:"epoch"`
	Revision         int64                   `json:"revision"`
}

// CommitOption configures Commit.
type CommitOption func(*commitOptions) error

type commitOptions struct {
	ops      []clientv3.Op
	maxValue int
	session  *coordinator.Session
}

// WithOps adds the caller's own puts and deletes to the fenced Txn: they
// apply exactly when the business state and operation record do. Their keys
// must lie outside leasegate's prefix.
func WithOps(ops ...clientv3.Op) CommitOption {
	return func(o *commitOptions) error {
		o.ops = append(o.ops, ops...)
		return nil
	}
}

// WithSession makes the commit refuse itself, before any I/O, once the
// session that holds the grant can no longer act (s.Err() is not nil):
// past its local deadline, a worker stops before etcd has to stop it.
func WithSession(s *coordinator.Session) CommitOption {
	return func(o *commitOptions) error {
		if s == nil {
			return fmt.Errorf("nil session")
		}
		o.session = s
		return nil
	}
}

// WithMaxValueBytes sets the largest accepted Intent.Value (default
// DefaultMaxValueBytes, at most MaxValueBytesLimit).
func WithMaxValueBytes(n int) CommitOption {
	return func(o *commitOptions) error {
		if n <= 0 || n > MaxValueBytesLimit {
			return fmt.Errorf("max value bytes %d out of range 1..%d", n, MaxValueBytesLimit)
		}
		o.maxValue = n
		return nil
	}
}

// Commit performs the protected write in one etcd Txn: it compares realm,
// fence, owner identity, epoch and lease liveness (coordinator.Guard), that
// the operation is not yet recorded, and that the state is at the expected
// version; then puts the state, the operation record and the caller's ops
// together. It returns a nil error exactly for committed and
// historical_retry; any other outcome is an error whose
// coordinator.DispositionOf names it.
func Commit(ctx context.Context, c *coordinator.Coordinator, g coordinator.Grant, in Intent, opts ...CommitOption) (Receipt, error) {
	r, err := commit(ctx, c, g, in, opts)
	if c != nil {
		d := r.Disposition
		if err != nil {
			d = coordinator.DispositionOf(err)
		}
		store.Of(c).Metrics().Count("commit", d)
	}
	return r, err
}

func commit(ctx context.Context, c *coordinator.Coordinator, g coordinator.Grant, in Intent, opts []CommitOption) (Receipt, error) {
	o := commitOptions{maxValue: DefaultMaxValueBytes}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return Receipt{}, store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if err := validate(c, g, in, o); err != nil {
		return Receipt{}, err
	}
	if o.session != nil {
		if err := o.session.Err(); err != nil {
			return Receipt{}, err
		}
	}
	if in.Tenant != g.Tenant || in.Task != g.Task {
		return Receipt{}, store.NewError(coordinator.ScopeMismatch, "commit", in.Tenant, in.Task, fmt.Sprintf("the grant is for %s/%s", g.Tenant, g.Task), nil)
	}
	req, receipt, digest := prepare(c, g, in, o.ops)
	resp, err := store.Of(c).Txn(ctx, req)
	if err != nil {
		return Receipt{}, err
	}
	r, err := commitAnswer(c, g, in, receipt, digest, resp)
	// A refusal by the guard names the holder; one more read fills in its
	// TTL and the state version the Txn could not show.
	return r, store.Of(c).DescribeHolder(ctx, err)
}

// commitAnswer reads the commit's answer: the receipt when it applied, else the
// Else reads in DESIGN.md's order — the guard's refusals, then
// historical_retry or operation_conflict, then version_conflict.
func commitAnswer(c *coordinator.Coordinator, g coordinator.Grant, in Intent, receipt Receipt, digest string, resp *clientv3.TxnResponse) (Receipt, error) {
	lg := store.Of(c).Logger()
	// Log fields are built only when the level is on: the commit path
	// allocates nothing for a logger that would drop them.
	log := func(msg string, extra zap.Field) {
		if ce := lg.Check(zap.InfoLevel, msg); ce != nil {
			ce.Write(zap.String("tenant", in.Tenant), zap.String("task", in.Task),
				zap.String("operation", in.Operation), zap.Int64("epoch", g.Epoch), extra)
		}
	}
	if resp.Succeeded {
		receipt.Revision = resp.Header.Revision
		log("committed", zap.Int64("version", receipt.CommittedVersion))
		return receipt, nil
	}
	if err := store.Of(c).CheckGuard("commit", g, resp.Responses[:3]); err != nil {
		log("commit refused", zap.String("disposition", string(coordinator.DispositionOf(err))))
		return Receipt{}, err
	}
	if opKV := resp.Responses[3].GetResponseRange().GetKvs(); len(opKV) > 0 {
		var rec store.OpRecord
		if err := json.Unmarshal(opKV[0].Value, &rec); err != nil {
			return Receipt{}, store.NewError(coordinator.CorruptRecord, "commit", in.Tenant, in.Task, fmt.Sprintf("operation record %s is unreadable", opKV[0].Key), err)
		}
		if rec.PayloadDigest != digest {
			return Receipt{}, store.NewError(coordinator.OperationConflict, "commit", in.Tenant, in.Task, fmt.Sprintf("operation %q was committed at epoch %d with another payload", in.Operation, rec.Epoch), nil)
		}
		var prior Receipt
		if err := json.Unmarshal(rec.Receipt, &prior); err != nil {
			return Receipt{}, store.NewError(coordinator.CorruptRecord, "commit", in.Tenant, in.Task, fmt.Sprintf("the receipt in operation record %s is unreadable", opKV[0].Key), err)
		}
		prior.Disposition = coordinator.HistoricalRetry
		prior.Revision = opKV[0].ModRevision
		log("historical retry", zap.Int64("original-epoch", prior.Epoch))
		return prior, nil
	}
	var version int64
	if st := resp.Responses[4].GetResponseRange().GetKvs(); len(st) > 0 {
		version = st[0].Version
	}
	return Receipt{}, store.NewError(coordinator.VersionConflict, "commit", in.Tenant, in.Task, fmt.Sprintf("the state is at version %d, the intent expects %d", version, in.ExpectedVersion), nil)
}

// prepare builds the commit's Txn: the receipt it stores, the operation
// record and the state, and the compares and reads around them.
func prepare(c *coordinator.Coordinator, g coordinator.Grant, in Intent, ops []clientv3.Op) (store.TxnRequest, Receipt, string) {
	k := c.Keys()
	stateKey, opKey := k.State(in.Tenant, in.Task), k.Op(in.Tenant, in.Task, in.Operation)
	digest := Digest(in)
	receipt := Receipt{Disposition: coordinator.Committed, Tenant: in.Tenant, Task: in.Task, Operation: in.Operation,
		CommittedVersion: in.ExpectedVersion + 1, Epoch: g.Epoch}
	opValue := encodeOpRecord(digest, receipt, g.Epoch, g.Owner)
	stateValue := encodeState(store.StateRecord{Version: in.ExpectedVersion + 1, Value: in.Value,
		Operation: in.Operation, Epoch: g.Epoch})

	cmps, els := store.Of(c).Guarded(g, 2)
	cmps = append(cmps,
		clientv3.Compare(clientv3.CreateRevision(opKey), "=", 0),
		clientv3.Compare(clientv3.Version(stateKey), "=", in.ExpectedVersion))
	then := append([]clientv3.Op{clientv3.OpPut(stateKey, string(stateValue)), clientv3.OpPut(opKey, string(opValue))}, ops...)
	els = append(els, clientv3.OpGet(opKey), clientv3.OpGet(stateKey))
	return store.TxnRequest{Op: "commit", Tenant: in.Tenant, Task: in.Task, If: cmps, Then: then, Else: els}, receipt, digest
}

func validate(c *coordinator.Coordinator, g coordinator.Grant, in Intent, o commitOptions) error {
	if c == nil {
		return store.NewError(store.InvalidInput, "commit", "", "", "nil coordinator", nil)
	}
	if err := g.Validate(); err != nil {
		return store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := coordinator.CheckTask(in.Tenant, in.Task); err != nil {
		return store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := coordinator.CheckLabel("operation", in.Operation); err != nil {
		return store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("%v", err), nil)
	}
	if in.ExpectedVersion < 0 {
		return store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("expected version %d is negative", in.ExpectedVersion), nil)
	}
	if len(in.Value) > o.maxValue {
		return store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("value is %d bytes; at most %d", len(in.Value), o.maxValue), nil)
	}
	prefix := c.Keys().Prefix() + "/"
	for i, op := range o.ops {
		if !op.IsPut() && !op.IsDelete() {
			return store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("caller op %d is neither a put nor a delete", i), nil)
		}
		if len(op.RangeBytes()) > 0 {
			return store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("caller op %d is a range; give single keys", i), nil)
		}
		if key := string(op.KeyBytes()); key == "" || strings.HasPrefix(key, prefix) {
			return store.NewError(store.InvalidInput, "commit", "", "", fmt.Sprintf("caller op %d touches key %q inside leasegate's prefix %s", i, key, prefix), nil)
		}
	}
	return nil
}

// Digest is the canonical payload digest of an intent: SHA-256 over its
// fields, each length-prefixed, so no two different intents share one.
func Digest(in Intent) string {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(in.ExpectedVersion))
	return digest.Of([]byte("leasegate-intent-v1"), []byte(in.Tenant), []byte(in.Task), []byte(in.Operation), in.Value, v[:])
}
