package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/digest"
)

// State is where an effect stands. The zero value "" means "no record" (or
// "don't know") and never reads as any outcome.
type State string

// The states of the effect ledger (docs/ledger.md).
const (
	Proposed     State = "PROPOSED"      // intent recorded; nothing approved, nothing sent
	Authorized   State = "AUTHORIZED"    // an approval bound to the exact parameter and precondition digests
	Dispatching  State = "DISPATCHING"   // an epoch claimed the dispatch; the call may be in flight or done
	Confirmed    State = "CONFIRMED"     // the provider's evidence says it applied
	Failed       State = "FAILED"        // the provider definitely refused, with evidence
	Unknown      State = "UNKNOWN"       // it may or may not have applied; only Observe can tell
	Superseded   State = "SUPERSEDED"    // the world changed; this intent is void, propose anew
	ManualReview State = "MANUAL_REVIEW" // the ledger cannot decide; an operator must (Resolve)
	Rejected     State = "REJECTED"      // refused before dispatch
)

// States lists every state, in the order of the state machine: a copy,
// the caller may change it.
func States() []State { return append([]State(nil), allStates...) }

var allStates = []State{Proposed, Authorized, Dispatching, Confirmed, Failed, Unknown, Superseded, ManualReview, Rejected}

// ParseState reads a state name (as printed, e.g. "MANUAL_REVIEW").
func ParseState(s string) (State, error) {
	for _, st := range allStates {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown state %q: one of %v", s, allStates)
}

// Terminal reports whether s is one of the ledger's states and no
// transition leaves it. A state the ledger does not know (a record edited
// by hand) is not terminal: it must never read as settled.
func (s State) Terminal() bool {
	if _, err := ParseState(string(s)); err != nil {
		return false
	}
	for _, t := range table {
		if t.From == s {
			return false
		}
	}
	return true
}

// Effect is what an operation does at a provider: its kind (which adapter),
// its target, its parameters and the policy version it was decided under.
// Its digest is over the canonical form of Params (object keys sorted,
// insignificant space dropped), so equal parameters written differently
// share one.
type Effect struct {
	Kind   string          `json:"kind"`
	Target string          `json:"target"`
	Params json.RawMessage `json:"params,omitempty"`
	Policy string          `json:"policy"`
}

// Observation is the world as an adapter saw it: a digest of what matters
// to an effect's precondition, when it was seen, and any detail.
type Observation struct {
	Digest string          `json:"digest"`
	At     time.Time       `json:"at"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// Requirement is a precondition an effect declares on another adapter's
// world: "the target of this DNS change is the current writer of that
// topology". Effect names the world to observe — an effect of the other
// adapter's kind, as ObservePrecondition takes it; it is never dispatched,
// and its Policy is not used — and Precondition what it must show (the
// digest, and when the proposer saw it). Dispatch observes it through that
// adapter after the claim, beside the effect's own precondition and with
// the same revalidation: a changed world sends nothing (SUPERSEDED), one
// that cannot be observed withdraws the claim (a hold). So the worker's
// own belief about that world — a cache gone stale while it was paused —
// cannot carry the effect through.
type Requirement struct {
	Effect       Effect      `json:"effect"`
	Precondition Observation `json:"precondition"`
}

// MaxRequirements is the most requirements one effect declares.
const MaxRequirements = 8

// Evidence is what a provider showed for an outcome: its own request or
// change ids, and detail. Empty evidence (no ids, and a detail that says
// nothing) is none: nothing reaches CONFIRMED or FAILED without some.
type Evidence struct {
	ProviderIDs []string        `json:"provider_ids,omitempty"`
	Detail      json.RawMessage `json:"detail,omitempty"`
	At          time.Time       `json:"at,omitzero"`
}

// Empty reports whether e shows nothing: no provider id, and a detail that
// says nothing — absent, whitespace, or a placeholder JSON value (null, an
// empty or all-space string, {}, []), as an adapter marshalling a nil map
// would send.
func (e Evidence) Empty() bool { return len(e.ProviderIDs) == 0 && saysNothing(e.Detail) }

// saysNothing reports whether a JSON detail is absent or a placeholder:
// null, "" (or a string of whitespace), {} or []. A detail that is not
// JSON says something (checkDetail refuses it).
func saysNothing(d json.RawMessage) bool {
	t := bytes.TrimSpace(d)
	if len(t) == 0 {
		return true
	}
	switch t[0] {
	case 'n', '"', '{', '[':
	default:
		return false // a number or a boolean says something
	}
	var v any
	if json.Unmarshal(t, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(v) == ""
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// Approval is one person's (or policy's) consent to exactly one set of
// parameters under exactly one observed world: it names the digests it
// approves, and Authorize refuses it for any other.
//
// Policy is the policy version it was given under: empty, Authorize fills
// in the current one (WithPolicy); another than the current one is
// operation_conflict. Dispatch compares it with the version current then.
type Approval struct {
	Approver           string    `json:"approver"`
	ParamsDigest       string    `json:"params_digest"`
	PreconditionDigest string    `json:"precondition_digest"`
	Policy             string    `json:"policy,omitempty"`
	At                 time.Time `json:"at,omitzero"`
	Note               string    `json:"note,omitempty"`
}

// Answer is a provider's answer to one dispatch that its owner could not
// record as the dispatch's outcome, because the owner's grant stopped being
// current while the call was in flight. It is kept on the record under that
// dispatch's id, never as the record's state: the next owner's Reconcile
// settles the record from it (CONFIRMED or FAILED with its evidence, or
// UNKNOWN with it) without asking the provider again.
type Answer struct {
	DispatchID string    `json:"dispatch_id"` // the dispatch it answers (Record.DispatchID)
	Epoch      int64     `json:"epoch"`       // the grant that dispatched and received it
	Owner      string    `json:"owner"`
	To         State     `json:"to"` // what the dispatch would have recorded: CONFIRMED, FAILED or UNKNOWN
	Reason     string    `json:"reason"`
	Evidence   *Evidence `json:"evidence,omitempty"`
	At         time.Time `json:"at"` // the ledger's clock when it was kept
}

// Record is the ledger's record of one operation: one stable operation id
// bound to one effect. Operation ids never contain an epoch or an attempt
// number: a retry, by this owner or the next, is the same operation.
type Record struct {
	Tenant    string `json:"tenant"`
	Task      string `json:"task"`
	Operation string `json:"operation"`
	State     State  `json:"state"`

	Effect         Effect      `json:"effect"`
	ParamsDigest   string      `json:"params_digest"`
	Approval       *Approval   `json:"approval,omitempty"`
	ApprovalDigest string      `json:"approval_digest,omitempty"`
	AuthorizedAt   time.Time   `json:"authorized_at,omitzero"` // when Authorize recorded the approval (the ledger's clock): its validity runs from here
	Precondition   Observation `json:"precondition"`
	// Requires are the preconditions the effect declared on other
	// adapters' worlds (Requirement), fixed at Propose: Dispatch and
	// Reconcile revalidate each as they do Precondition.
	Requires []Requirement `json:"requires,omitempty"`

	ProposedEpoch int64     `json:"proposed_epoch"`
	Epoch         int64     `json:"epoch"`                    // the epoch that last claimed dispatch; 0 before any
	Owner         string    `json:"owner,omitempty"`          // the owner of that epoch
	Attempts      int       `json:"attempts"`                 // dispatches claimed (each under the same operation id)
	DispatchID    string    `json:"dispatch_id,omitempty"`    // unique per claimed dispatch (attempt), never sent to the provider
	DispatchLease int64     `json:"dispatch_lease,omitempty"` // the etcd lease of the process running that dispatch (WithDispatchLease); 0: none
	DispatchedAt  time.Time `json:"dispatched_at,omitzero"`   // when the dispatch was claimed (the ledger's clock); the call leaves after Precondition, at most WithCallTimeout later
	Evidence      *Evidence `json:"evidence,omitempty"`       // the provider's, for CONFIRMED and FAILED (and what was seen otherwise)
	Answer        *Answer   `json:"answer,omitempty"`         // an answer to dispatch DispatchID its owner could no longer record; cleared by the next transition

	Seq      int64 `json:"seq"`                // transitions so far; the journal entry of the last one has this number
	Revision int64 `json:"revision,omitempty"` // etcd ModRevision of the record as read (not stored)
}

// answer is the kept answer of the record's last claimed dispatch, if any:
// an answer under another dispatch id is not this record's to settle from.
func (r Record) answer() *Answer {
	if r.Answer == nil || r.DispatchID == "" || r.Answer.DispatchID != r.DispatchID {
		return nil
	}
	return r.Answer
}

// Digest is the canonical digest of an effect (Record.ParamsDigest):
// SHA-256 over "leasegate-effect-v1", its kind, target, canonical
// parameters (CanonicalParams) and policy, each prefixed by its length in
// bytes as 8 bytes big-endian, hex-encoded. docs/ledger.md specifies the
// bytes; api/leasegate/v1/testdata/digest_vectors.json has test vectors any
// language can check itself against (TestDigestVectors checks them here).
func Digest(e Effect) (string, error) {
	params, err := canonical(e.Params)
	if err != nil {
		return "", err
	}
	return digest.Of("leasegate-effect-v1", e.Kind, e.Target, string(params), e.Policy), nil
}

// Digest is the digest of an approval, stored in the record it authorized.
func (a Approval) Digest() string {
	return digest.Of("leasegate-approval-v2", a.Approver, a.ParamsDigest, a.PreconditionDigest, a.Policy,
		a.At.UTC().Format(time.RFC3339Nano), a.Note)
}

// CanonicalParams is the canonical form of an effect's parameters, the
// form its digest is over and the ledger stores: the JSON value re-encoded
// with object keys sorted by their UTF-8 bytes (the last of duplicate keys
// kept), no insignificant space, numbers exactly as written, and strings
// escaped as docs/ledger.md says. Empty (or all-space) params are "null".
func CanonicalParams(raw json.RawMessage) ([]byte, error) { return canonical(raw) }

// canonical is CanonicalParams.
func canonical(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("null"), nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("params are not JSON: %w", err)
	}
	if d.More() {
		return nil, fmt.Errorf("params hold more than one JSON value")
	}
	return json.Marshal(v)
}

// Limits on what a record carries, so that one transition Txn stays far
// below etcd's request size limit.
const (
	MaxParamsBytes   = 64 << 10
	MaxDetailBytes   = 64 << 10
	MaxTargetLen     = 1024
	MaxProviderIDs   = 64
	MaxTextLen       = 1024 // reasons, notes, why
	maxProviderIDLen = 1024
)

func checkEffect(e Effect) error {
	if err := coordinator.CheckLabel("effect kind", e.Kind); err != nil {
		return err
	}
	if e.Target == "" || len(e.Target) > MaxTargetLen {
		return fmt.Errorf("effect target must be 1-%d bytes, is %d", MaxTargetLen, len(e.Target))
	}
	if err := coordinator.CheckLabel("effect policy", e.Policy); err != nil {
		return err
	}
	if len(e.Params) > MaxParamsBytes {
		return fmt.Errorf("effect params are %d bytes; at most %d", len(e.Params), MaxParamsBytes)
	}
	_, err := canonical(e.Params)
	return err
}

// checkRequirement reports why r cannot be a requirement: its effect
// must name a kind, a target and JSON params (its policy is not used: any
// label, or none), and its precondition a digest and a time.
func checkRequirement(i int, r Requirement) error {
	e := r.Effect
	if e.Policy == "" {
		e.Policy = "-" // not used: checkEffect wants a label
	}
	if err := checkEffect(e); err != nil {
		return fmt.Errorf("requirement %d: %w", i, err)
	}
	if err := checkObservation(fmt.Sprintf("requirement %d's precondition", i), r.Precondition); err != nil {
		return err
	}
	return nil
}

// sameRequirements reports whether a and b require the same worlds: the
// same kinds, targets, canonical params and digests, in order.
func sameRequirements(a, b []Requirement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Effect.Kind != y.Effect.Kind || x.Effect.Target != y.Effect.Target || x.Precondition.Digest != y.Precondition.Digest {
			return false
		}
		px, _ := canonical(x.Effect.Params)
		py, _ := canonical(y.Effect.Params)
		if !bytes.Equal(px, py) {
			return false
		}
	}
	return true
}

func checkObservation(what string, o Observation) error {
	if o.Digest == "" || len(o.Digest) > MaxTargetLen {
		return fmt.Errorf("%s digest must be 1-%d bytes", what, MaxTargetLen)
	}
	if o.At.IsZero() {
		return fmt.Errorf("%s has no observation time", what)
	}
	return checkDetail(what, o.Detail)
}

func checkEvidence(ev Evidence) error {
	if len(ev.ProviderIDs) > MaxProviderIDs {
		return fmt.Errorf("evidence has %d provider ids; at most %d", len(ev.ProviderIDs), MaxProviderIDs)
	}
	for i, id := range ev.ProviderIDs {
		if id == "" || len(id) > maxProviderIDLen {
			return fmt.Errorf("evidence provider id %d must be 1-%d bytes", i, maxProviderIDLen)
		}
	}
	return checkDetail("evidence", ev.Detail)
}

func checkDetail(what string, d json.RawMessage) error {
	if len(d) > MaxDetailBytes {
		return fmt.Errorf("%s detail is %d bytes; at most %d", what, len(d), MaxDetailBytes)
	}
	if len(bytes.TrimSpace(d)) > 0 && !json.Valid(d) {
		return fmt.Errorf("%s detail is not JSON", what)
	}
	return nil
}

func checkText(what, s string, required bool) error {
	if required && s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(s) > MaxTextLen {
		return fmt.Errorf("%s is %d bytes; at most %d", what, len(s), MaxTextLen)
	}
	return nil
}
