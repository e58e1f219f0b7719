// Package devprovider is the simulated providers of leasegate serve --dev
// and of the gateway's tests: a database topology whose writer a promotion
// changes, and a DNS zone whose records an upsert sets, both in memory,
// each with its own authority that an adapter asks (Observe) rather than
// remembers. They are the drill's two providers (drill/providers.go) cut
// down to what a local try and a test need.
//
// # Guarantees
//
//   - Apply is idempotent on the operation id: a second Apply of an id
//     already applied changes nothing and returns the first evidence.
//   - Every Apply the provider receives is in Calls, with its epoch, before
//     it is applied: a test reads exactly what reached the provider.
//
// # Non-guarantees
//
//   - Nothing persists: a restart forgets every call.
//   - No fence is checked here: the provider takes whatever reaches it, as
//     a real one that does not take part would.
package devprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/leasegate/leasegate/ledger"
)

// The effect kinds of the two adapters.
const (
	KindPromote = "db.promote"
	KindDNS     = "dns.upsert"
)

// Call is one Apply the provider received.
type Call struct {
	Kind      string    `json:"kind"`
	Target    string    `json:"target"`
	Operation string    `json:"operation"`
	Epoch     int64     `json:"epoch"`
	At        time.Time `json:"at"`
}

// Provider is both simulated authorities. The zero value is not usable:
// New.
type Provider struct {
	mu      sync.Mutex
	writer  string
	records map[string]string
	applied map[string]string // operation id → provider request id
	calls   []Call
	n       int
	// BeforeApply, if set, runs at the start of every Apply, after the call
	// is in Calls: a test holds a dispatch in flight there. An Apply whose
	// context is done when it returns applies nothing and is ambiguous, as
	// a real call cut short would be.
	BeforeApply func(ctx context.Context, operation string)
	// AfterApply, if set, runs after Apply applied, before it answers: a
	// test holds an applied call whose answer has not yet come back there.
	AfterApply func(ctx context.Context, operation string)
}

// New is a provider whose topology's writer is writer.
func New(writer string) *Provider {
	return &Provider{writer: writer, records: map[string]string{}, applied: map[string]string{}}
}

// Calls is every Apply received, in order.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// Writer is the topology's writer now.
func (p *Provider) Writer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writer
}

// Record is a DNS record's value now.
func (p *Provider) Record(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records[name]
}

// Digest is the precondition digest both adapters observe: the writer.
func Digest(writer string) string { return "writer=" + writer }

// Adapters are the provider's two adapters.
func (p *Provider) Adapters() []ledger.Adapter {
	return []ledger.Adapter{adapter{p, KindPromote}, adapter{p, KindDNS}}
}

type adapter struct {
	p    *Provider
	kind string
}

func (a adapter) Kind() string { return a.kind }

func (a adapter) Contract() ledger.Contract {
	return ledger.Contract{Lookup: true, RetrySafe: true, Retention: 24 * time.Hour}
}

func (a adapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	w := a.p.Writer()
	detail, _ := json.Marshal(map[string]string{"writer": w})
	return ledger.Observation{Digest: Digest(w), At: time.Now(), Detail: detail}, nil
}

func (a adapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	p, e, operation, epoch := a.p, call.Effect, call.Operation, call.Epoch
	p.mu.Lock()
	p.calls = append(p.calls, Call{Kind: a.kind, Target: e.Target, Operation: operation, Epoch: epoch, At: time.Now()})
	before, after := p.BeforeApply, p.AfterApply
	p.mu.Unlock()
	if before != nil {
		before(ctx, operation)
	}
	if err := ctx.Err(); err != nil { // the call was cut short on our side: it may or may not arrive
		return ledger.Evidence{}, ledger.Ambiguous(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.applied[operation]; ok {
		return ledger.Evidence{ProviderIDs: []string{id}, Detail: json.RawMessage(`"already applied under this operation id"`)}, nil
	}
	switch a.kind {
	case KindPromote:
		p.writer = e.Target
	case KindDNS:
		var params struct {
			Value string `json:"value"`
		}
		if err := json.Unmarshal(e.Params, &params); err != nil || params.Value == "" {
			return ledger.Evidence{}, ledger.Refused("params must be {\"value\": \"...\"}",
				ledger.Evidence{Detail: json.RawMessage(`"bad params"`)})
		}
		p.records[e.Target] = params.Value
	}
	p.n++
	id := fmt.Sprintf("%s-%d", a.kind, p.n)
	p.applied[operation] = id
	if after != nil {
		p.mu.Unlock()
		after(ctx, operation)
		p.mu.Lock()
	}
	return ledger.Evidence{ProviderIDs: []string{id}}, nil
}

func (a adapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	p, operation := a.p, rec.Operation
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.applied[operation]; ok {
		return ledger.Applied, ledger.Evidence{ProviderIDs: []string{id}}, nil
	}
	return ledger.NotApplied, ledger.Evidence{Detail: json.RawMessage(`"no request under this operation id"`)}, nil
}
