package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
)

// Ledger keeps the records of external effects of the tasks of one
// coordinator's keyspace, and is the gateway to their providers.
type Ledger struct {
	c        *coordinator.Coordinator
	adapters map[string]Adapter // by kind
	lg       *zap.Logger
	options
}

// New is a ledger on c's keyspace with the given adapters (WithAdapters).
// A ledger without adapters can read records and Resolve them, not
// dispatch.
func New(c *coordinator.Coordinator, opts ...Option) (*Ledger, error) {
	if c == nil {
		return nil, coordinator.Invalid("ledger", "nil coordinator")
	}
	o := options{now: time.Now, sleep: sleepTimer, pollInitial: DefaultPollInitial, pollMax: DefaultPollMax,
		polls: DefaultPolls, recordTimeout: DefaultRecordTimeout, callTimeout: DefaultCallTimeout}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, coordinator.Invalid("ledger", "%v", err)
		}
	}
	l := &Ledger{c: c, adapters: map[string]Adapter{}, options: o}
	for _, a := range o.adapterList {
		if _, dup := l.adapters[a.Kind()]; dup {
			return nil, coordinator.Invalid("ledger", "two adapters for kind %q", a.Kind())
		}
		l.adapters[a.Kind()] = a
	}
	if o.logger == nil {
		o.logger = c.Logger()
	}
	l.lg = o.logger.Named("ledger")
	return l, nil
}

// Propose records an intent: operation (its stable id, never containing an
// epoch or an attempt number) bound to effect e, decided while the world
// looked like pre. It is idempotent on the operation id: the same effect
// digest returns the existing record, whatever its state; another digest is
// operation_conflict.
func (l *Ledger) Propose(ctx context.Context, g coordinator.Grant, operation string, e Effect, pre Observation) (Record, error) {
	const op = "propose"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	if err := checkEffect(e); err != nil {
		return Record{}, coordinator.Invalid(op, "%v", err)
	}
	if _, ok := l.adapters[e.Kind]; !ok {
		return Record{}, coordinator.Invalid(op, "no adapter for effect kind %q", e.Kind)
	}
	if err := checkObservation("precondition", pre); err != nil {
		return Record{}, coordinator.Invalid(op, "%v", err)
	}
	d, _ := Digest(e)
	e.Params, _ = canonical(e.Params)
	pre.At = pre.At.UTC()
	rec := Record{Tenant: g.Tenant, Task: g.Task, Operation: operation, Effect: e, ParamsDigest: d,
		Precondition: pre, ProposedEpoch: g.Epoch}
	out, err := l.apply(ctx, g, rec, change{to: Proposed, by: StepPropose, reason: "proposed"})
	if errors.Is(err, errExists) {
		if out.ParamsDigest == d {
			return out, nil
		}
		return out, coordinator.Refusal(coordinator.OperationConflict, op, g.Tenant, g.Task,
			fmt.Sprintf("operation %q was proposed (epoch %d) with another effect digest; a new intent needs a new operation id",
				operation, out.ProposedEpoch))
	}
	return out, err
}

// Authorize binds approval a to the operation: a must name exactly the
// record's parameter digest and precondition digest (an approval of other
// parameters, or of another observed world, is operation_conflict). Repeating
// the same approval of an AUTHORIZED record returns it unchanged.
func (l *Ledger) Authorize(ctx context.Context, g coordinator.Grant, operation string, a Approval) (Record, error) {
	const op = "authorize"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	if err := coordinator.CheckLabel("approver", a.Approver); err != nil {
		return Record{}, coordinator.Invalid(op, "%v", err)
	}
	if a.ParamsDigest == "" || a.PreconditionDigest == "" {
		return Record{}, coordinator.Invalid(op, "the approval must name the parameter and precondition digests it approves")
	}
	if err := checkText("approval note", a.Note, false); err != nil {
		return Record{}, coordinator.Invalid(op, "%v", err)
	}
	a.At = a.At.UTC()
	rec, err := l.read(ctx, op, g, operation)
	if err != nil {
		return rec, err
	}
	if rec.State == Authorized && rec.ApprovalDigest == a.Digest() {
		return rec, nil
	}
	if !Allowed(rec.State, Authorized, StepAuthorize) {
		return rec, l.refuse(Authorized, l.illegal(op, g, rec, Authorized, ""))
	}
	switch {
	case a.ParamsDigest != rec.ParamsDigest:
		return rec, coordinator.Refusal(coordinator.OperationConflict, op, g.Tenant, g.Task,
			fmt.Sprintf("the approval is of parameters %s; operation %q has %s", short(a.ParamsDigest), operation, short(rec.ParamsDigest)))
	case a.PreconditionDigest != rec.Precondition.Digest:
		return rec, coordinator.Refusal(coordinator.OperationConflict, op, g.Tenant, g.Task,
			fmt.Sprintf("the approval is of world %s; operation %q was proposed against %s", short(a.PreconditionDigest), operation, short(rec.Precondition.Digest)))
	}
	return l.apply(ctx, g, rec, change{to: Authorized, by: StepAuthorize, reason: "approved", approver: a.Approver,
		mutate: func(r *Record) { r.Approval, r.ApprovalDigest = &a, a.Digest() }})
}

// Reject refuses the operation before dispatch (from PROPOSED or
// AUTHORIZED).
func (l *Ledger) Reject(ctx context.Context, g coordinator.Grant, operation, reason string) (Record, error) {
	const op = "reject"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	if err := checkText("reason", reason, true); err != nil {
		return Record{}, coordinator.Invalid(op, "%v", err)
	}
	rec, err := l.read(ctx, op, g, operation)
	if err != nil {
		return rec, err
	}
	return l.applyOnce(ctx, g, rec, change{to: Rejected, by: StepReject, reason: reason})
}

// Dispatch is the gateway, the only path to an adapter's Apply. In order:
// it reads the record under g's fence (a stale grant is refused here and
// no adapter is called); it observes the precondition now (a changed world
// makes the record SUPERSEDED, and nothing is dispatched); it claims the
// dispatch — {operation, epoch, effect} into DISPATCHING — in a fenced Txn;
// it calls Apply with the operation id as idempotency key; and it records
// CONFIRMED (with evidence), FAILED (a definite refusal, with evidence) or
// UNKNOWN (anything else). If g stopped being current while the call was in
// flight, that last Txn is refused and the record stays DISPATCHING for the
// next owner's Reconcile.
//
// The error is about the ledger's own requests (refused, hold, unknown); the
// effect's outcome is the returned record's State. On an error the record
// is the last one known.
func (l *Ledger) Dispatch(ctx context.Context, g coordinator.Grant, operation string) (Record, error) {
	const op = "dispatch"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	rec, err := l.fencedRead(ctx, op, g, operation)
	if err != nil {
		return rec, err
	}
	if !Allowed(rec.State, Dispatching, StepDispatch) {
		return rec, l.refuse(Dispatching, l.illegal(op, g, rec, Dispatching, ""))
	}
	ad, ok := l.adapters[rec.Effect.Kind]
	if !ok {
		return rec, coordinator.Invalid(op, "no adapter for effect kind %q", rec.Effect.Kind)
	}
	same, now, err := l.revalidate(ctx, ad, rec)
	if err != nil {
		return rec, err
	}
	if !same {
		return l.apply(ctx, g, rec, change{to: Superseded, by: StepSupersede,
			reason:   fmt.Sprintf("precondition changed: approved %s (seen %s), now %s (seen %s)", short(rec.Precondition.Digest), stamp(rec.Precondition.At), short(now.Digest), stamp(now.At)),
			evidence: &Evidence{Detail: now.Detail, At: now.At}})
	}
	at, id := l.now().UTC(), uuid.NewString()
	claimed, err := l.persist(ctx, g, rec, change{to: Dispatching, by: StepDispatch,
		reason: fmt.Sprintf("dispatch claimed; precondition %s revalidated (seen %s)", short(now.Digest), stamp(now.At)),
		mutate: func(r *Record) {
			r.Epoch, r.Owner, r.Attempts, r.DispatchedAt, r.DispatchID = g.Epoch, g.Owner, r.Attempts+1, at, id
		}}, "claim not recorded; retrying")
	if err != nil {
		return claimed, err
	}
	actx, cancel := context.WithTimeout(ctx, l.callTimeout)
	ev, applyErr := ad.Apply(actx, rec.Effect, operation, g.Epoch)
	cancel()
	// The provider has answered (or not): record it even if ctx ended meanwhile.
	return l.persist(context.WithoutCancel(ctx), g, claimed, l.outcomeOfApply(ev, applyErr), "outcome not recorded; retrying")
}

// persist makes one transition of a dispatch, retrying within
// WithRecordTimeout while etcd does not answer (a hold, or an unknown
// outcome), so that a claim or a provider's answer is not lost for a moment
// without quorum. After an attempt whose outcome is unknown, finding the
// record at exactly this transition of this very dispatch (state, sequence
// number, dispatch id) means that attempt applied.
func (l *Ledger) persist(ctx context.Context, g coordinator.Grant, from Record, ch change, retrying string) (Record, error) {
	rctx, cancel := context.WithTimeout(ctx, l.recordTimeout)
	defer cancel()
	want := from
	if ch.mutate != nil {
		ch.mutate(&want)
	}
	wait, unknown := 50*time.Millisecond, false
	for {
		actx, cancelAttempt := context.WithTimeout(rctx, l.recordTimeout/5)
		out, err := l.apply(actx, g, from, ch)
		cancelAttempt()
		switch d := coordinator.DispositionOf(err); {
		case err == nil:
			return out, nil
		case unknown && (d == coordinator.IllegalTransition || d == coordinator.VersionConflict) &&
			out.State == ch.to && out.Seq == from.Seq+1 && out.DispatchID == want.DispatchID:
			return out, nil
		case d == coordinator.OutcomeUnknown:
			unknown = true
		case d != coordinator.AuthorityUnavailable:
			return out, err
		}
		l.lg.Warn(retrying, l.fields(g, from.Operation, zap.String("to", string(ch.to)),
			zap.String("disposition", string(coordinator.DispositionOf(err))))...)
		if sleepTimer(rctx, wait) != nil {
			return from, err
		}
		wait = min(2*wait, time.Second)
	}
}

// outcomeOfApply reads Apply's answer: CONFIRMED only with evidence, FAILED
// only for a definite refusal with evidence, UNKNOWN otherwise.
func (l *Ledger) outcomeOfApply(ev Evidence, err error) change {
	var refused *RefusedError
	if bad := checkEvidence(ev); err == nil && bad != nil {
		return change{to: Unknown, by: StepDispatch, reason: "provider answered with unusable evidence: " + truncate(bad.Error())}
	}
	if errors.As(err, &refused) {
		if bad := checkEvidence(refused.Evidence); bad != nil {
			return change{to: Unknown, by: StepDispatch, reason: "provider refused with unusable evidence: " + truncate(bad.Error())}
		}
	}
	switch {
	case err == nil && !ev.Empty():
		return change{to: Confirmed, by: StepDispatch, reason: "provider applied", evidence: l.stamped(ev)}
	case err == nil:
		return change{to: Unknown, by: StepDispatch, reason: "provider answered without evidence"}
	case errors.As(err, &refused) && !refused.Evidence.Empty():
		return change{to: Failed, by: StepDispatch, reason: truncate("provider refused: " + refused.Reason), evidence: l.stamped(refused.Evidence)}
	case errors.As(err, &refused):
		return change{to: Unknown, by: StepDispatch, reason: truncate("provider refused without evidence: " + refused.Reason)}
	}
	ch := change{to: Unknown, by: StepDispatch, reason: "ambiguous: " + truncate(err.Error())}
	if !ev.Empty() && checkEvidence(ev) == nil {
		ch.evidence = l.stamped(ev)
	}
	return ch
}

// Revalidate observes the operation's precondition now and reports whether
// it is still the world the operation was proposed and approved against.
// Use it before a dependent effect: a checkpointed plan is evidence of what
// was, not authority for what is. (Dispatch does this itself.)
func (l *Ledger) Revalidate(ctx context.Context, g coordinator.Grant, operation string) (bool, Observation, error) {
	const op = "revalidate"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return false, Observation{}, err
	}
	rec, err := l.read(ctx, op, g, operation)
	if err != nil {
		return false, Observation{}, err
	}
	if rec.State == "" {
		return false, Observation{}, coordinator.Refusal(coordinator.IllegalTransition, op, g.Tenant, g.Task,
			fmt.Sprintf("no operation %q is recorded", operation))
	}
	ad, ok := l.adapters[rec.Effect.Kind]
	if !ok {
		return false, Observation{}, coordinator.Invalid(op, "no adapter for effect kind %q", rec.Effect.Kind)
	}
	same, now, err := l.revalidate(ctx, ad, rec)
	return same, now, err
}

func (l *Ledger) revalidate(ctx context.Context, ad Adapter, rec Record) (bool, Observation, error) {
	cctx, cancel := context.WithTimeout(ctx, l.callTimeout)
	defer cancel()
	now, err := ad.Precondition(cctx, rec.Effect)
	if err == nil {
		err = checkObservation("precondition", now)
	}
	if err != nil {
		return false, now, &coordinator.Error{Disposition: coordinator.AuthorityUnavailable, Op: "precondition",
			Tenant: rec.Tenant, Task: rec.Task,
			Detail: fmt.Sprintf("the %s provider could not show the world now; nothing dispatched; hold", rec.Effect.Kind), Err: err}
	}
	return now.Digest == rec.Precondition.Digest, now, nil
}

// Record reads one operation's record and its journal, in transition order,
// at one revision. A missing record has State "".
func (l *Ledger) Record(ctx context.Context, tenant, task, operation string) (Record, []Transition, error) {
	const op = "ops show"
	if err := coordinator.CheckTask(tenant, task); err != nil {
		return Record{}, nil, coordinator.Invalid(op, "%v", err)
	}
	if err := coordinator.CheckLabel("operation", operation); err != nil {
		return Record{}, nil, coordinator.Invalid(op, "%v", err)
	}
	k := l.c.Keys()
	resp, err := l.c.Txn(ctx, coordinator.TxnRequest{Op: op, Tenant: tenant, Task: task, ReadOnly: true,
		Then: []clientv3.Op{
			clientv3.OpGet(k.Effect(tenant, task, operation)),
			clientv3.OpGet(k.JournalOperationPrefix(tenant, task, operation), clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
		}})
	if err != nil {
		return Record{}, nil, err
	}
	rec, found, err := decodeRecord(resp.Responses[0].GetResponseRange().GetKvs())
	if err != nil || !found {
		return Record{Tenant: tenant, Task: task, Operation: operation}, nil, err
	}
	js, err := decodeJournal(resp.Responses[1].GetResponseRange().GetKvs())
	return rec, js, err
}

// Journal reads every transition of a task's operations, in the order they
// happened (their revisions).
func (l *Ledger) Journal(ctx context.Context, tenant, task string) ([]Transition, error) {
	const op = "ops journal"
	if err := coordinator.CheckTask(tenant, task); err != nil {
		return nil, coordinator.Invalid(op, "%v", err)
	}
	resp, err := l.c.Txn(ctx, coordinator.TxnRequest{Op: op, Tenant: tenant, Task: task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(l.c.Keys().JournalPrefix(tenant, task), clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))}})
	if err != nil {
		return nil, err
	}
	return decodeJournal(resp.Responses[0].GetResponseRange().GetKvs())
}

// List reads the records of a task (tenant and task), of a tenant (task
// ""), or of every tenant (both ""), optionally only those in state.
func (l *Ledger) List(ctx context.Context, tenant, task string, state State) ([]Record, error) {
	const op = "ops list"
	k := l.c.Keys()
	prefix := k.TaskPrefix("effects", "")
	switch {
	case task != "":
		if err := coordinator.CheckTask(tenant, task); err != nil {
			return nil, coordinator.Invalid(op, "%v", err)
		}
		prefix = k.EffectPrefix(tenant, task)
	case tenant != "":
		if err := coordinator.CheckLabel("tenant", tenant); err != nil {
			return nil, coordinator.Invalid(op, "%v", err)
		}
		prefix = k.TaskPrefix("effects", tenant)
	}
	if state != "" {
		if _, err := ParseState(string(state)); err != nil {
			return nil, coordinator.Invalid(op, "%v", err)
		}
	}
	resp, err := l.c.Txn(ctx, coordinator.TxnRequest{Op: op, Tenant: tenant, Task: task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(prefix, clientv3.WithPrefix())}})
	if err != nil {
		return nil, err
	}
	var out []Record
	count := map[State]int{}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		rec, _, err := decodeRecord([]*mvccpb.KeyValue{kv})
		if err != nil {
			return nil, err
		}
		count[rec.State]++
		if state == "" || rec.State == state {
			out = append(out, rec)
		}
	}
	if tenant == "" && task == "" { // the whole ledger: the gauge of records by state
		for _, st := range States {
			l.c.Metrics().LedgerRecords(string(st), count[st])
		}
	}
	return out, nil
}

// read is a linearizable read of one record of g's task (State "" if none).
func (l *Ledger) read(ctx context.Context, op string, g coordinator.Grant, operation string) (Record, error) {
	resp, err := l.c.Txn(ctx, coordinator.TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(l.c.Keys().Effect(g.Tenant, g.Task, operation))}})
	if err != nil {
		return Record{}, err
	}
	rec, found, err := decodeRecord(resp.Responses[0].GetResponseRange().GetKvs())
	if !found && err == nil {
		rec = Record{Tenant: g.Tenant, Task: g.Task, Operation: operation}
	}
	return rec, err
}

// fencedRead reads one record in a Txn guarded by g: a grant that is not
// current is refused (stale_owner, expired_owner, ...) before anything else
// happens.
func (l *Ledger) fencedRead(ctx context.Context, op string, g coordinator.Grant, operation string) (Record, error) {
	key := l.c.Keys().Effect(g.Tenant, g.Task, operation)
	resp, err := l.c.Txn(ctx, coordinator.TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		If: l.c.Guard(g), Then: []clientv3.Op{clientv3.OpGet(key)}, Else: l.c.GuardReads(g)})
	if err != nil {
		return Record{}, err
	}
	if !resp.Succeeded {
		return Record{}, l.c.CheckGuard(op, g, resp.Responses)
	}
	rec, found, err := decodeRecord(resp.Responses[0].GetResponseRange().GetKvs())
	if !found && err == nil {
		rec = Record{Tenant: g.Tenant, Task: g.Task, Operation: operation}
	}
	return rec, err
}

func (l *Ledger) checkGrantOp(op string, g coordinator.Grant, operation string) error {
	if err := g.Validate(); err != nil {
		return coordinator.Invalid(op, "%v", err)
	}
	if err := coordinator.CheckLabel("operation", operation); err != nil {
		return coordinator.Invalid(op, "%v", err)
	}
	return nil
}

func decodeRecord(kvs []*mvccpb.KeyValue) (Record, bool, error) {
	if len(kvs) == 0 {
		return Record{}, false, nil
	}
	var rec Record
	if err := json.Unmarshal(kvs[0].Value, &rec); err != nil {
		return Record{}, false, &coordinator.Error{Disposition: coordinator.OutcomeUnknown, Op: "ledger",
			Detail: fmt.Sprintf("record %s is unreadable", kvs[0].Key), Err: err}
	}
	rec.Revision = kvs[0].ModRevision
	return rec, true, nil
}

func decodeJournal(kvs []*mvccpb.KeyValue) ([]Transition, error) {
	out := make([]Transition, 0, len(kvs))
	for _, kv := range kvs {
		var t Transition
		if err := json.Unmarshal(kv.Value, &t); err != nil {
			return nil, &coordinator.Error{Disposition: coordinator.OutcomeUnknown, Op: "ledger",
				Detail: fmt.Sprintf("journal entry %s is unreadable", kv.Key), Err: err}
		}
		t.Revision = kv.CreateRevision
		out = append(out, t)
	}
	return out, nil
}

func (l *Ledger) stamped(ev Evidence) *Evidence {
	if ev.At.IsZero() {
		ev.At = l.now()
	}
	ev.At = ev.At.UTC()
	return &ev
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func truncate(s string) string {
	if len(s) > MaxTextLen {
		return s[:MaxTextLen]
	}
	return s
}
