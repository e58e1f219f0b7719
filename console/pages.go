package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// nowView is the Now page: tasks, sessions, realm.
type nowView struct {
	base
	Tasks       []coordinator.Ownership
	TasksErr    []refusal
	Sessions    []session
	SessionsVia string // what the sessions were read with
	SessionsErr *refusal
	Realm       *coordinator.OriginCheck
	RealmErr    *refusal
	Attention   int
	AttnErr     *refusal
}

// session is one lease and the tasks it holds.
type session struct {
	Lease   int64
	Owner   string
	TTLLeft int64
	Granted int64
	Tasks   []coordinator.LeaseTask
}

func (c *Console) nowPage(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.whoIs(w, r)
	if !ok {
		return
	}
	v := nowView{base: c.base(cl, "Now", "now")}
	for _, s := range scopes(cl.id) {
		ts, err := cl.api.Tasks(cl.ctx, s)
		if err != nil {
			v.TasksErr = append(v.TasksErr, refusalOf(err))
			continue
		}
		v.Tasks = append(v.Tasks, ts...)
	}
	slices.SortFunc(v.Tasks, func(a, b coordinator.Ownership) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Task, b.Task))
	})
	// Sessions: the leases, for an operator of all tenants (ListLeases);
	// for anyone else, the leases of the tasks it may read.
	if leases, err := cl.api.Leases(cl.ctx); err == nil {
		v.SessionsVia = "every lease carrying owner keys (OperatorService.ListLeases)"
		for _, li := range leases {
			v.Sessions = append(v.Sessions, session{Lease: li.ID, Owner: li.Owner, TTLLeft: li.TTLLeft, Granted: li.GrantedTTL, Tasks: li.Tasks})
		}
	} else {
		v.SessionsVia = "the leases of the tasks above (this identity cannot list every lease: " + refusalOf(err).Detail + ")"
		by := map[int64]*session{}
		for _, t := range v.Tasks {
			if !t.Owned() {
				continue
			}
			s := by[t.Lease]
			if s == nil {
				s = &session{Lease: t.Lease, Owner: t.Owner, TTLLeft: t.TTLLeft, Granted: -1}
				by[t.Lease] = s
			}
			s.Tasks = append(s.Tasks, coordinator.LeaseTask{Tenant: t.Tenant, Task: t.Task, Epoch: t.Epoch})
		}
		for _, s := range by {
			v.Sessions = append(v.Sessions, *s)
		}
		slices.SortFunc(v.Sessions, func(a, b session) int { return cmp.Compare(a.Lease, b.Lease) })
	}
	if chk, err := cl.api.ShowRealm(cl.ctx); err == nil {
		v.Realm = &chk
	} else {
		rf := refusalOf(err)
		v.RealmErr = &rf
	}
	attn, err := c.attention(cl, "", "")
	if err != nil {
		rf := refusalOf(err)
		v.AttnErr = &rf
	}
	v.Attention = len(attn)
	c.render(w, http.StatusOK, "now", v)
}

// needsHuman are the states a person must look at first.
var needsHuman = []ledger.State{ledger.Unknown, ledger.ManualReview}

// attention reads the records that need a human, of tenant (or every tenant
// the caller serves) and task.
func (c *Console) attention(cl caller, tenant, task string) ([]ledger.Record, error) {
	var out []ledger.Record
	for _, st := range needsHuman {
		rs, err := c.records(cl, tenant, task, st)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// records lists records of tenant and task in state through the API, for
// every tenant the caller serves when tenant is "".
func (c *Console) records(cl caller, tenant, task string, st ledger.State) ([]ledger.Record, error) {
	ss := []string{tenant}
	if tenant == "" {
		ss = scopes(cl.id)
	}
	var out []ledger.Record
	for _, s := range ss {
		rs, err := cl.api.List(cl.ctx, s, task, st)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// effectsView is the Effects page: the records that need a human, then
// the rest, filtered.
type effectsView struct {
	base
	Filter    effectsFilter
	States    []ledger.State
	Attention []ledger.Record
	Rest      []ledger.Record
	Err       *refusal
}

type effectsFilter struct{ Tenant, Task, State, Kind string }

func (c *Console) effectsPage(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.whoIs(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := effectsFilter{Tenant: q.Get("tenant"), Task: q.Get("task"), State: q.Get("state"), Kind: q.Get("kind")}
	v := effectsView{base: c.base(cl, "Effects", "effects"), Filter: f, States: ledger.States()}
	var st ledger.State
	if f.State != "" {
		s, err := ledger.ParseState(f.State)
		if err != nil {
			c.fail(w, r, http.StatusBadRequest, cl, "Effects", store.NewError(store.InvalidInput, "ops list", "", "", fmt.Sprintf("state: %v", err), nil))
			return
		}
		st = s
	}
	if f.Task != "" && f.Tenant == "" {
		c.fail(w, r, http.StatusBadRequest, cl, "Effects", store.NewError(store.InvalidInput, "ops list", "", "", "a task filter needs its tenant", nil))
		return
	}
	all, err := c.records(cl, f.Tenant, f.Task, st)
	if err != nil {
		c.fail(w, r, statusOf(err), cl, "Effects", err)
		return
	}
	for _, rec := range all {
		if f.Kind != "" && rec.Effect.Kind != f.Kind {
			continue
		}
		if slices.Contains(needsHuman, rec.State) {
			v.Attention = append(v.Attention, rec)
		} else {
			v.Rest = append(v.Rest, rec)
		}
	}
	byTask := func(a, b ledger.Record) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Task, b.Task), cmp.Compare(a.Operation, b.Operation))
	}
	// UNKNOWN before MANUAL_REVIEW: an effect that may have applied is the
	// more urgent.
	slices.SortFunc(v.Attention, func(a, b ledger.Record) int {
		return cmp.Or(cmp.Compare(slices.Index(needsHuman, a.State), slices.Index(needsHuman, b.State)), byTask(a, b))
	})
	slices.SortFunc(v.Rest, byTask)
	c.render(w, http.StatusOK, "effects", v)
}

// operationView is one operation's page.
type operationView struct {
	base
	Record     ledger.Record
	Journal    []ledger.Transition
	Owner      *coordinator.Ownership
	OwnerErr   *refusal
	Timeline   timelineView
	CanApprove bool
	CanReject  bool
	CanResolve bool
	ResolveTo  []ledger.State
	Flash      string
	// DigestMatches: the parameters digest recomputed here from the
	// effect shown (ledger.Digest) is the record's.
	DigestMatches bool
}

func (c *Console) operationPage(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.whoIs(w, r)
	if !ok {
		return
	}
	tenant, task, operation := r.PathValue("tenant"), r.PathValue("task"), r.PathValue("operation")
	v, err := c.operation(cl, tenant, task, operation)
	if err != nil {
		c.fail(w, r, statusOf(err), cl, "Operation "+operation, err)
		return
	}
	// The line after a decision (post/redirect/get) comes from the URL,
	// which anyone can link to: it names only a decision the journal
	// holds, and no words of the URL's own.
	if step, ok := decisionSteps[r.URL.Query().Get("done")]; ok {
		for _, t := range v.Journal {
			if t.By == step {
				v.Flash = r.URL.Query().Get("done")
			}
		}
	}
	c.render(w, http.StatusOK, "operation", v)
}

// decisionSteps are the console's decisions, by the journal step each
// records.
var decisionSteps = map[string]ledger.Step{"approve": ledger.StepAuthorize, "reject": ledger.StepReject, "resolve": ledger.StepResolve}

// operation reads one operation's view: the record, its journal, the
// task's owner, the timeline of both.
func (c *Console) operation(cl caller, tenant, task, operation string) (operationView, error) {
	rec, journal, err := cl.api.Record(cl.ctx, tenant, task, operation)
	if err != nil {
		return operationView{}, err
	}
	if rec.State == "" {
		return operationView{}, store.NewError(coordinator.InvalidInput, "ops show", tenant, task, "no operation "+operation+" is recorded for "+tenant+"/"+task, nil)
	}
	v := operationView{base: c.base(cl, "Operation "+operation, "effects"), Record: rec, Journal: journal}
	if o, err := cl.api.Owner(cl.ctx, tenant, task); err == nil {
		v.Owner = &o
	} else {
		rf := refusalOf(err)
		v.OwnerErr = &rf
	}
	v.Timeline = c.timeline(rec, journal, v.Owner)
	if d, err := ledger.Digest(rec.Effect); err == nil && d == rec.ParamsDigest {
		v.DigestMatches = true
	}
	v.CanApprove = cl.id.Has(gateway.RoleApprover) && ledger.Allowed(rec.State, ledger.Authorized, ledger.StepAuthorize)
	v.CanReject = cl.id.Has(gateway.RoleApprover) && ledger.Allowed(rec.State, ledger.Rejected, ledger.StepReject)
	for _, to := range ledger.States() {
		if ledger.Allowed(rec.State, to, ledger.StepResolve) {
			v.ResolveTo = append(v.ResolveTo, to)
		}
	}
	v.CanResolve = cl.id.Has(gateway.RoleOperator) && len(v.ResolveTo) > 0
	return v, nil
}
