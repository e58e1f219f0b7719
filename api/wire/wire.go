// Package wire maps between the API's messages (api/leasegate/v1) and the
// Go API's values (coordinator, fencedtxn, ledger), both ways: the gateway
// and the Go client share it, so a field cannot be carried one way and lost
// the other. Nothing here decides anything.
package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

func LeaseHex(id int64) string {
	if id == 0 {
		return ""
	}
	return coordinator.FormatLeaseID(id)
}

func GrantToProto(g coordinator.Grant) *leasegatev1.Grant {
	return &leasegatev1.Grant{Realm: g.Realm, Tenant: g.Tenant, Task: g.Task, Owner: g.Owner, Epoch: g.Epoch, Lease: LeaseHex(g.Lease)}
}

// GrantFromProto reads a grant; a missing or malformed one is invalid_input.
func GrantFromProto(op string, p *leasegatev1.Grant) (coordinator.Grant, error) {
	if p == nil {
		return coordinator.Grant{}, store.NewError(store.InvalidInput, op, "", "", "grant is required (Claim returns one)", nil)
	}
	lease, err := coordinator.ParseLeaseID(p.GetLease())
	if err != nil {
		return coordinator.Grant{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("grant.lease: %v", err), nil)
	}
	g := coordinator.Grant{Realm: p.GetRealm(), Tenant: p.GetTenant(), Task: p.GetTask(), Owner: p.GetOwner(), Epoch: p.GetEpoch(), Lease: lease}
	if err := g.Validate(); err != nil {
		return coordinator.Grant{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("grant: %v", err), nil)
	}
	return g, nil
}

func OwnershipToProto(o coordinator.Ownership) *leasegatev1.Ownership {
	return &leasegatev1.Ownership{Tenant: o.Tenant, Task: o.Task, Owner: o.Owner, Epoch: o.Epoch, Lease: LeaseHex(o.Lease),
		TtlLeftSeconds: o.TTLLeft, Stale: o.Stale, FenceEpoch: o.Fence, StateVersion: o.StateVersion,
		LastOperation: o.LastOperation, Revision: o.Revision}
}

func ReceiptToProto(r fencedtxn.Receipt) *leasegatev1.Receipt {
	return &leasegatev1.Receipt{Disposition: string(r.Disposition), Tenant: r.Tenant, Task: r.Task, Operation: r.Operation,
		CommittedVersion: r.CommittedVersion, Epoch: r.Epoch, Revision: r.Revision}
}

func StateToProto(s fencedtxn.State) *leasegatev1.State {
	return &leasegatev1.State{Tenant: s.Tenant, Task: s.Task, Value: s.Value, Version: s.Version, Operation: s.Operation,
		Epoch: s.Epoch, Revision: s.Revision}
}

func TS(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func TSFrom(p *timestamppb.Timestamp) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.AsTime()
}

func Dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func EvidenceToProto(e *ledger.Evidence) *leasegatev1.Evidence {
	if e == nil {
		return nil
	}
	return &leasegatev1.Evidence{ProviderIds: e.ProviderIDs, DetailJson: string(e.Detail), At: TS(e.At)}
}

// RawJSON reads a JSON field: empty is none, anything else must be one
// JSON value.
func RawJSON(op, field, s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if !json.Valid([]byte(s)) {
		return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%s is not one JSON value", field), nil)
	}
	return json.RawMessage(s), nil
}

func EvidenceFromProto(op string, p *leasegatev1.Evidence) (ledger.Evidence, error) {
	if p == nil {
		return ledger.Evidence{}, nil
	}
	d, err := RawJSON(op, "evidence.detail_json", p.GetDetailJson())
	return ledger.Evidence{ProviderIDs: p.GetProviderIds(), Detail: d, At: TSFrom(p.GetAt())}, err
}

func EffectFromProto(op string, p *leasegatev1.Effect) (ledger.Effect, error) {
	if p == nil {
		return ledger.Effect{}, store.NewError(store.InvalidInput, op, "", "", "effect is required", nil)
	}
	params, err := RawJSON(op, "effect.params_json", p.GetParamsJson())
	return ledger.Effect{Kind: p.GetKind(), Target: p.GetTarget(), Params: params, Policy: p.GetPolicy()}, err
}

func ObservationFromProto(op string, p *leasegatev1.Observation) (ledger.Observation, error) {
	if p == nil {
		return ledger.Observation{}, store.NewError(store.InvalidInput, op, "", "", "precondition is required", nil)
	}
	d, err := RawJSON(op, "precondition.detail_json", p.GetDetailJson())
	return ledger.Observation{Digest: p.GetDigest(), At: TSFrom(p.GetObservedAt()), Detail: d}, err
}

// RequirementsFromProto reads the requirements of a proposal: each needs
// an effect and a precondition.
func RequirementsFromProto(op string, ps []*leasegatev1.Requirement) ([]ledger.Requirement, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out := make([]ledger.Requirement, 0, len(ps))
	for i, p := range ps {
		if p.GetEffect() == nil || p.GetPrecondition() == nil {
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("requires[%d] needs an effect and a precondition", i), nil)
		}
		e, err := EffectFromProto(op, p.GetEffect())
		if err != nil {
			return nil, err
		}
		o, err := ObservationFromProto(op, p.GetPrecondition())
		if err != nil {
			return nil, err
		}
		out = append(out, ledger.Requirement{Effect: e, Precondition: o})
	}
	return out, nil
}

// RequirementsToProto writes requirements.
func RequirementsToProto(rs []ledger.Requirement) []*leasegatev1.Requirement {
	if len(rs) == 0 {
		return nil
	}
	out := make([]*leasegatev1.Requirement, 0, len(rs))
	for _, r := range rs {
		out = append(out, &leasegatev1.Requirement{Effect: EffectToProto(r.Effect), Precondition: ObservationToProto(r.Precondition)})
	}
	return out
}

func RecordToProto(r ledger.Record) *leasegatev1.EffectRecord {
	out := &leasegatev1.EffectRecord{Tenant: r.Tenant, Task: r.Task, Operation: r.Operation, State: string(r.State),
		Effect:       &leasegatev1.Effect{Kind: r.Effect.Kind, Target: r.Effect.Target, ParamsJson: string(r.Effect.Params), Policy: r.Effect.Policy},
		ParamsDigest: r.ParamsDigest, ApprovalDigest: r.ApprovalDigest,
		Precondition:  &leasegatev1.Observation{Digest: r.Precondition.Digest, ObservedAt: TS(r.Precondition.At), DetailJson: string(r.Precondition.Detail)},
		ProposedEpoch: r.ProposedEpoch, Epoch: r.Epoch, Owner: r.Owner, Attempts: int64(r.Attempts), DispatchId: r.DispatchID,
		DispatchedAt: TS(r.DispatchedAt), Evidence: EvidenceToProto(r.Evidence), Seq: r.Seq, Revision: r.Revision,
		AuthorizedAt: TS(r.AuthorizedAt), Requires: RequirementsToProto(r.Requires)}
	if r.DispatchLease != 0 {
		out.DispatchLease = coordinator.FormatLeaseID(r.DispatchLease)
	}
	if a := r.Answer; a != nil {
		out.Answer = &leasegatev1.Answer{DispatchId: a.DispatchID, Epoch: a.Epoch, Owner: a.Owner, To: string(a.To), Reason: a.Reason,
			Evidence: EvidenceToProto(a.Evidence), At: TS(a.At)}
	}
	if a := r.Approval; a != nil {
		out.Approval = &leasegatev1.Approval{Approver: a.Approver, ParamsDigest: a.ParamsDigest, PreconditionDigest: a.PreconditionDigest,
			At: TS(a.At), Note: a.Note, Policy: a.Policy}
	}
	return out
}

func RecordsToProto(rs []ledger.Record) []*leasegatev1.EffectRecord {
	out := make([]*leasegatev1.EffectRecord, 0, len(rs))
	for _, r := range rs {
		out = append(out, RecordToProto(r))
	}
	return out
}

func TransitionToProto(t ledger.Transition) *leasegatev1.Transition {
	return &leasegatev1.Transition{Seq: t.Seq, From: string(t.From), To: string(t.To), By: string(t.By), Epoch: t.Epoch,
		Owner: t.Owner, Reason: t.Reason, Evidence: EvidenceToProto(t.Evidence), Approver: t.Approver, At: TS(t.At), Revision: t.Revision, Policy: t.Policy}
}

// The other direction: the API's messages back to the Go API's values, for
// the Go client.

// OwnershipFromProto reads an ownership (a zero one for nil).
func OwnershipFromProto(p *leasegatev1.Ownership) coordinator.Ownership {
	lease, _ := coordinator.ParseLeaseID(p.GetLease())
	return coordinator.Ownership{Tenant: p.GetTenant(), Task: p.GetTask(), Owner: p.GetOwner(), Epoch: p.GetEpoch(), Lease: lease,
		TTLLeft: p.GetTtlLeftSeconds(), Stale: p.GetStale(), Fence: p.GetFenceEpoch(), StateVersion: p.GetStateVersion(),
		LastOperation: p.GetLastOperation(), Revision: p.GetRevision()}
}

// ReceiptFromProto reads a receipt.
func ReceiptFromProto(p *leasegatev1.Receipt) fencedtxn.Receipt {
	return fencedtxn.Receipt{Disposition: coordinator.Disposition(p.GetDisposition()), Tenant: p.GetTenant(), Task: p.GetTask(),
		Operation: p.GetOperation(), CommittedVersion: p.GetCommittedVersion(), Epoch: p.GetEpoch(), Revision: p.GetRevision()}
}

// StateFromProto reads a protected state.
func StateFromProto(p *leasegatev1.State) fencedtxn.State {
	return fencedtxn.State{Tenant: p.GetTenant(), Task: p.GetTask(), Value: p.GetValue(), Version: p.GetVersion(),
		Operation: p.GetOperation(), Epoch: p.GetEpoch(), Revision: p.GetRevision()}
}

// EffectToProto writes an effect.
func EffectToProto(e ledger.Effect) *leasegatev1.Effect {
	return &leasegatev1.Effect{Kind: e.Kind, Target: e.Target, ParamsJson: string(e.Params), Policy: e.Policy}
}

// ObservationToProto writes an observation.
func ObservationToProto(o ledger.Observation) *leasegatev1.Observation {
	return &leasegatev1.Observation{Digest: o.Digest, ObservedAt: TS(o.At), DetailJson: string(o.Detail)}
}

func evidenceFrom(p *leasegatev1.Evidence) *ledger.Evidence {
	if p == nil {
		return nil
	}
	ev := ledger.Evidence{ProviderIDs: p.GetProviderIds(), At: TSFrom(p.GetAt())}
	if d := p.GetDetailJson(); d != "" {
		ev.Detail = json.RawMessage(d)
	}
	return &ev
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// RecordFromProto reads an effect record.
func RecordFromProto(p *leasegatev1.EffectRecord) ledger.Record {
	r := ledger.Record{Tenant: p.GetTenant(), Task: p.GetTask(), Operation: p.GetOperation(), State: ledger.State(p.GetState()),
		Effect: ledger.Effect{Kind: p.GetEffect().GetKind(), Target: p.GetEffect().GetTarget(), Params: raw(p.GetEffect().GetParamsJson()),
			Policy: p.GetEffect().GetPolicy()},
		ParamsDigest: p.GetParamsDigest(), ApprovalDigest: p.GetApprovalDigest(),
		Precondition: ledger.Observation{Digest: p.GetPrecondition().GetDigest(), At: TSFrom(p.GetPrecondition().GetObservedAt()),
			Detail: raw(p.GetPrecondition().GetDetailJson())},
		ProposedEpoch: p.GetProposedEpoch(), Epoch: p.GetEpoch(), Owner: p.GetOwner(), Attempts: int(p.GetAttempts()),
		DispatchID: p.GetDispatchId(), DispatchedAt: TSFrom(p.GetDispatchedAt()), Evidence: evidenceFrom(p.GetEvidence()),
		Seq: p.GetSeq(), Revision: p.GetRevision(), AuthorizedAt: TSFrom(p.GetAuthorizedAt())}
	for _, q := range p.GetRequires() {
		r.Requires = append(r.Requires, ledger.Requirement{
			Effect: ledger.Effect{Kind: q.GetEffect().GetKind(), Target: q.GetEffect().GetTarget(), Params: raw(q.GetEffect().GetParamsJson()),
				Policy: q.GetEffect().GetPolicy()},
			Precondition: ledger.Observation{Digest: q.GetPrecondition().GetDigest(), At: TSFrom(q.GetPrecondition().GetObservedAt()),
				Detail: raw(q.GetPrecondition().GetDetailJson())}})
	}
	if l := p.GetDispatchLease(); l != "" {
		r.DispatchLease, _ = coordinator.ParseLeaseID(l) // a malformed one reads as none: it only informs
	}
	if a := p.GetAnswer(); a != nil {
		r.Answer = &ledger.Answer{DispatchID: a.GetDispatchId(), Epoch: a.GetEpoch(), Owner: a.GetOwner(), To: ledger.State(a.GetTo()),
			Reason: a.GetReason(), Evidence: evidenceFrom(a.GetEvidence()), At: TSFrom(a.GetAt())}
	}
	if a := p.GetApproval(); a != nil {
		r.Approval = &ledger.Approval{Approver: a.GetApprover(), ParamsDigest: a.GetParamsDigest(),
			PreconditionDigest: a.GetPreconditionDigest(), Policy: a.GetPolicy(), At: TSFrom(a.GetAt()), Note: a.GetNote()}
	}
	return r
}

// RecordsFromProto reads effect records.
func RecordsFromProto(ps []*leasegatev1.EffectRecord) []ledger.Record {
	out := make([]ledger.Record, 0, len(ps))
	for _, p := range ps {
		out = append(out, RecordFromProto(p))
	}
	return out
}

// TransitionFromProto reads a journal entry of the record's operation.
func TransitionFromProto(rec ledger.Record, p *leasegatev1.Transition) ledger.Transition {
	return ledger.Transition{Tenant: rec.Tenant, Task: rec.Task, Operation: rec.Operation, Seq: p.GetSeq(),
		From: ledger.State(p.GetFrom()), To: ledger.State(p.GetTo()), By: ledger.Step(p.GetBy()), Epoch: p.GetEpoch(),
		Owner: p.GetOwner(), Reason: p.GetReason(), Evidence: evidenceFrom(p.GetEvidence()), Approver: p.GetApprover(),
		At: TSFrom(p.GetAt()), Revision: p.GetRevision(), Policy: p.GetPolicy()}
}

// ErrorFromRefusal is the *coordinator.Error a Refusal describes, cause
// attached.
func ErrorFromRefusal(r *leasegatev1.Refusal, cause error) *coordinator.Error {
	e := store.NewError(coordinator.Disposition(r.GetDisposition()), r.GetOp(), r.GetTenant(), r.GetTask(), r.GetDetail(), cause)
	if h := r.GetHolder(); h != nil {
		o := OwnershipFromProto(h)
		e.Holder = &o
	}
	return e
}

// LeaseInfoToProto writes a lease's description.
func LeaseInfoToProto(li coordinator.LeaseInfo) *leasegatev1.LeaseInfo {
	out := &leasegatev1.LeaseInfo{Lease: LeaseHex(li.ID), Owner: li.Owner, GrantedTtlSeconds: li.GrantedTTL,
		TtlLeftSeconds: li.TTLLeft, Revision: li.Revision}
	for _, t := range li.Tasks {
		out.Tasks = append(out.Tasks, &leasegatev1.LeaseTask{Tenant: t.Tenant, Task: t.Task, Epoch: t.Epoch, Stale: t.Stale})
	}
	return out
}

// LeaseInfoFromProto reads a lease's description (Tasks never nil).
func LeaseInfoFromProto(p *leasegatev1.LeaseInfo) coordinator.LeaseInfo {
	id, _ := coordinator.ParseLeaseID(p.GetLease())
	li := coordinator.LeaseInfo{ID: id, Owner: p.GetOwner(), GrantedTTL: p.GetGrantedTtlSeconds(), TTLLeft: p.GetTtlLeftSeconds(),
		Tasks: []coordinator.LeaseTask{}, Revision: p.GetRevision()}
	for _, t := range p.GetTasks() {
		li.Tasks = append(li.Tasks, coordinator.LeaseTask{Tenant: t.GetTenant(), Task: t.GetTask(), Epoch: t.GetEpoch(), Stale: t.GetStale()})
	}
	return li
}

// OriginToProto writes a realm's origin (nil for none).
func OriginToProto(o *coordinator.Origin) *leasegatev1.Origin {
	if o == nil {
		return nil
	}
	return &leasegatev1.Origin{Realm: o.Realm, ClusterId: o.ClusterID, Revision: o.Revision, RaftIndex: o.RaftIndex, At: TS(o.At)}
}

// OriginFromProto reads a realm's origin (nil for none).
func OriginFromProto(p *leasegatev1.Origin) *coordinator.Origin {
	if p == nil {
		return nil
	}
	return &coordinator.Origin{Realm: p.GetRealm(), ClusterID: p.GetClusterId(), Revision: p.GetRevision(), RaftIndex: p.GetRaftIndex(), At: TSFrom(p.GetAt())}
}
