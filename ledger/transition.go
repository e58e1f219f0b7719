package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Step names the Ledger call that makes a transition: the table says not
// only which state changes exist but which call may make each.
type Step string

// The calls that move a record.
const (
	StepPropose   Step = "propose"
	StepAuthorize Step = "authorize"
	StepReject    Step = "reject"
	StepDispatch  Step = "dispatch"  // claim, then confirm / fail / unknown (or withdraw the claim, nothing sent)
	StepSupersede Step = "supersede" // the world changed before the call: nothing sent
	StepExpire    Step = "expire"    // Dispatch: the approval expired or its policy changed; nothing claimed
	StepAnswer    Step = "answer"    // Dispatch: the provider's answer kept after the grant stopped being current
	StepReconcile Step = "reconcile"
	StepResolve   Step = "resolve" // an operator, from MANUAL_REVIEW only
)

// steps is every Step, for tools and tests that range over them.
var steps = []Step{StepPropose, StepAuthorize, StepReject, StepDispatch, StepSupersede, StepExpire, StepAnswer, StepReconcile, StepResolve}

// Steps returns every step (a copy).
func Steps() []Step { return append([]Step(nil), steps...) }

// Edge is one allowed transition: From to To, made by By.
type Edge struct {
	From, To State
	By       Step
}

// table is the effect ledger's state machine: every transition that can
// happen, and the only place that says so. From "" is the creation of a
// record. A transition not in it is refused with illegal_transition and
// writes nothing.
var table = []Edge{
	{"", Proposed, StepPropose},

	{Proposed, Authorized, StepAuthorize},
	{Proposed, Rejected, StepReject},

	{Authorized, Rejected, StepReject},
	{Authorized, Proposed, StepExpire}, // the approval no longer holds: approve again
	{Authorized, Dispatching, StepDispatch},

	{Dispatching, Superseded, StepSupersede}, // revalidated after the claim: the world changed, nothing sent
	{Dispatching, Authorized, StepDispatch},  // the claim withdrawn: the world could not be observed, nothing sent
	{Dispatching, Confirmed, StepDispatch},
	{Dispatching, Failed, StepDispatch},
	{Dispatching, Unknown, StepDispatch},
	{Dispatching, Dispatching, StepAnswer},  // the answer, kept when the dispatch's grant was no longer current
	{Dispatching, Unknown, StepReconcile},   // an older epoch's dispatch, on takeover
	{Dispatching, Confirmed, StepReconcile}, // an older epoch's dispatch, settled from its kept answer
	{Dispatching, Failed, StepReconcile},    // likewise

	{Unknown, Unknown, StepAnswer}, // the answer, kept after the next owner made the record UNKNOWN
	{Unknown, Confirmed, StepReconcile},
	{Unknown, Authorized, StepReconcile}, // not applied, and the provider's contract makes a retry under the same id safe
	{Unknown, ManualReview, StepReconcile},
	{Unknown, Superseded, StepReconcile},

	{ManualReview, Confirmed, StepResolve},
	{ManualReview, Failed, StepResolve},
	{ManualReview, Superseded, StepResolve},
	{ManualReview, Rejected, StepResolve},
}

// Allowed reports whether by may move a record from from to to.
func Allowed(from, to State, by Step) bool {
	for _, e := range table {
		if e == (Edge{from, to, by}) {
			return true
		}
	}
	return false
}

// Transition is one journal entry: one state change of one operation, as
// the Txn that made it wrote it. Revision is that Txn's etcd revision (the
// entry's CreateRevision, read back).
type Transition struct {
	Tenant    string    `json:"tenant"`
	Task      string    `json:"task"`
	Operation string    `json:"operation"`
	Seq       int64     `json:"seq"`
	From      State     `json:"from"`
	To        State     `json:"to"`
	By        Step      `json:"by"`
	Epoch     int64     `json:"epoch"` // the epoch of the grant that made it
	Owner     string    `json:"owner"`
	Reason    string    `json:"reason"`
	Evidence  *Evidence `json:"evidence,omitempty"`
	Approver  string    `json:"approver,omitempty"`
	Policy    string    `json:"policy,omitempty"` // the policy it ran under: the current one it checked, else its approval's, else its proposal's
	At        time.Time `json:"at"`               // the writer's clock: informative only
	Revision  int64     `json:"revision"`
}

// change is what a transition does besides moving the state.
type change struct {
	to       State
	by       Step
	reason   string
	evidence *Evidence
	approver string
	policy   string          // the current policy it checked, if it checked one
	mutate   func(r *Record) // further fields of the new record
}

// build is a transition's Txn and the record it writes, without I/O: the
// table's check, the new record and its journal entry (encode), and the
// compares — the grant's Guard and the record's ModRevision (CreateRevision
// 0 to create).
func (l *Ledger) build(g coordinator.Grant, rec Record, ch change) (store.TxnRequest, Record, error) {
	op := string(ch.by)
	if !Allowed(rec.State, ch.to, ch.by) {
		return store.TxnRequest{}, rec, l.illegal(op, g, rec, ch.to, "")
	}
	key, then, next, err := l.encode(g, rec, ch)
	if err != nil {
		return store.TxnRequest{}, rec, err
	}
	recCmp := clientv3.Compare(clientv3.ModRevision(key), "=", rec.Revision)
	if rec.State == "" {
		recCmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	cmps, reads := store.Of(l.c).Guarded(g, 1)
	return store.TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task,
		If:   append(cmps, recCmp),
		Then: then,
		Else: append(reads, clientv3.OpGet(key))}, next, nil
}

// encode is what a transition writes: the record's key, the puts of the
// new record (state ch.to, seq+1, no kept answer unless ch sets one) and of
// its journal entry, and the new record.
func (l *Ledger) encode(g coordinator.Grant, rec Record, ch change) (string, []clientv3.Op, Record, error) {
	op := string(ch.by)
	key := store.Of(l.c).Keys().Effect(g.Tenant, g.Task, rec.Operation)
	next := rec
	next.State = ch.to
	next.Seq = rec.Seq + 1
	next.Revision = 0
	next.Answer = nil
	if ch.evidence != nil {
		ev := *ch.evidence
		next.Evidence = &ev
	}
	if ch.mutate != nil {
		ch.mutate(&next)
	}
	policy := ch.policy
	switch {
	case policy != "":
	case next.Approval != nil:
		policy = next.Approval.Policy
	default:
		policy = next.Effect.Policy
	}
	entry := Transition{Tenant: g.Tenant, Task: g.Task, Operation: rec.Operation, Seq: next.Seq,
		From: rec.State, To: ch.to, By: ch.by, Epoch: g.Epoch, Owner: g.Owner, Reason: ch.reason,
		Evidence: ch.evidence, Approver: ch.approver, Policy: policy, At: l.now().UTC()}
	recValue, err := json.Marshal(next)
	if err != nil {
		return "", nil, rec, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("record: %v", err), nil)
	}
	entryValue, err := json.Marshal(entry)
	if err != nil {
		return "", nil, rec, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("journal entry: %v", err), nil)
	}
	return key, []clientv3.Op{
		clientv3.OpPut(key, string(recValue)),
		clientv3.OpPut(store.Of(l.c).Keys().JournalEntry(g.Tenant, g.Task, rec.Operation, next.Seq), string(entryValue)),
	}, next, nil
}

// transition moves rec (as read, at rec.Revision; or Revision 0 and State
// "" to create it) by ch in one fenced Txn (build), and classifies a refusal:
// the grant first (CheckGuard), then the record — a create that lost is
// errExists, a record moved to a state the table does not let ch leave is
// illegal_transition, otherwise version_conflict; the record returned with
// a refusal is the one the Txn's Else read. A transition the table forbids
// is refused before any I/O. Every outcome but errExists is counted in the
// ledger's transition metric; every record written or read back is the
// ledger's hint for the next transition of its operation.
func (l *Ledger) transition(ctx context.Context, g coordinator.Grant, rec Record, ch change) (_ Record, err error) {
	defer func() {
		if !errors.Is(err, errExists) {
			l.metrics.transition(ch.to, coordinator.DispositionOf(err))
		}
	}()
	op := string(ch.by)
	req, next, err := l.build(g, rec, ch)
	if err != nil {
		return rec, err
	}
	resp, err := store.Of(l.c).Txn(ctx, req)
	if err != nil {
		return rec, err
	}
	if !resp.Succeeded {
		if err := store.Of(l.c).CheckGuard(op, g, resp.Responses[:3]); err != nil {
			l.lg.Info("transition refused", l.fields(g, rec.Operation, zap.String("from", string(rec.State)),
				zap.String("to", string(ch.to)), zap.String("disposition", string(coordinator.DispositionOf(err))))...)
			return rec, err
		}
		cur, found, err := decodeRecord(resp.Responses[3].GetResponseRange().GetKvs())
		if err != nil {
			return rec, err
		}
		if !found {
			cur = Record{Tenant: g.Tenant, Task: g.Task, Operation: rec.Operation}
		}
		l.hints.put(cur)
		if rec.State == "" {
			// A create that lost: the caller (Propose) decides what the existing record means.
			return cur, errExists
		}
		if !Allowed(cur.State, ch.to, ch.by) {
			return cur, l.illegal(op, g, cur, ch.to, fmt.Sprintf(" (it moved from %s at revision %d)", rec.State, rec.Revision))
		}
		return cur, store.NewError(coordinator.VersionConflict, op, g.Tenant, g.Task, fmt.Sprintf("operation %q moved from revision %d to %d while deciding; read it and decide again",
			rec.Operation, rec.Revision, cur.Revision), nil)
	}
	next.Revision = resp.Header.Revision
	l.hints.put(next)
	if ce := l.lg.Check(zap.InfoLevel, "transition"); ce != nil { // the fields only when logged: this is every transition's path
		ce.Write(l.fields(g, rec.Operation, zap.String("from", string(rec.State)),
			zap.String("to", string(ch.to)), zap.String("reason", ch.reason))...)
	}
	return next, nil
}

// moved reports whether a transition from rec was refused because the
// record had moved (version_conflict, or illegal_transition from where it
// is now): out, read by the refused Txn's Else, is then the record to
// decide on.
func moved(rec, out Record, err error) bool {
	d := coordinator.DispositionOf(err)
	return (d == coordinator.VersionConflict || d == coordinator.IllegalTransition) && out.Revision != rec.Revision
}

// applyOnce is transition for an operator's or a caller's decision (Reject,
// Resolve) that may be retried after an unknown outcome: if the record's
// last transition is already this very one — same step, target, grant,
// reason, approver and evidence — the retry returns the record, as a retried
// commit returns its receipt, instead of illegal_transition.
func (l *Ledger) applyOnce(ctx context.Context, g coordinator.Grant, rec Record, ch change) (Record, error) {
	if rec.State != ch.to || rec.Seq == 0 {
		return l.transition(ctx, g, rec, ch)
	}
	resp, err := store.Of(l.c).Txn(ctx, store.TxnRequest{Op: string(ch.by), Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(store.Of(l.c).Keys().JournalEntry(g.Tenant, g.Task, rec.Operation, rec.Seq))}})
	if err != nil {
		return rec, err
	}
	js, err := decodeJournal(resp.Responses[0].GetResponseRange().GetKvs())
	if err != nil {
		return rec, err
	}
	if len(js) == 1 && sameDecision(js[0], g, ch) {
		return rec, nil
	}
	return l.transition(ctx, g, rec, ch)
}

func sameDecision(t Transition, g coordinator.Grant, ch change) bool {
	sameEvidence := (t.Evidence == nil) == (ch.evidence == nil)
	if sameEvidence && t.Evidence != nil {
		sameEvidence = slices.Equal(t.Evidence.ProviderIDs, ch.evidence.ProviderIDs) &&
			compact(t.Evidence.Detail) == compact(ch.evidence.Detail)
	}
	return sameEvidence && t.To == ch.to && t.By == ch.by && t.Epoch == g.Epoch && t.Owner == g.Owner &&
		t.Reason == ch.reason && t.Approver == ch.approver
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// errExists is transition's answer to a create whose record already exists.
var errExists = errors.New("ledger: record exists")

// refuse counts a transition to to that a call refused before trying it.
func (l *Ledger) refuse(to State, err error) error {
	l.metrics.transition(to, coordinator.DispositionOf(err))
	return err
}

// notRecorded is the one answer to a call naming an operation that is not
// recorded (the CLI's ops show gives the same): invalid input — the id
// names nothing; nothing was written. Only Propose creates a record.
func notRecorded(op string, g coordinator.Grant, operation string) error {
	return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("no operation %q is recorded for %s/%s; only propose creates one", operation, g.Tenant, g.Task), nil)
}

func (l *Ledger) illegal(op string, g coordinator.Grant, rec Record, to State, more string) error {
	from := rec.State
	if from == "" {
		from = "(none)"
	}
	return store.NewError(coordinator.IllegalTransition, op, g.Tenant, g.Task, fmt.Sprintf("operation %q is %s%s; %s may not move it to %s", rec.Operation, from, more, op, to), nil)
}
