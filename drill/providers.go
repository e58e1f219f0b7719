package drill

import (
	"errors"
	"fmt"
	"time"
)

// The simulated providers have their own authority: the topology's writer
// and the DNS record are theirs, and a worker learns them only by asking.
// Every call they receive and every change they apply goes into their log
// and into the trial's trajectory.

// Clusters of the scenario: the impaired primary region's writer and the
// secondary region's replica the runbook promotes.
const (
	clusterPrimary   = "aurora-use1"
	clusterSecondary = "aurora-usw2"
	// maintenance is where an operator's manual edit points the record.
	maintenance = "maintenance-page"
	// recordName is the checkout record traffic follows.
	recordName = "checkout.northstar.example"
)

// Provider retention windows: how long each remembers an idempotency key.
const (
	topologyRetention = 24 * time.Hour
	dnsRetention      = 24 * time.Hour
)

var (
	// errProviderRefused is a provider's definite no: nothing applied.
	errProviderRefused = errors.New("drill: provider refused")
	// errResponseLost is a call whose answer never came back; the provider
	// may or may not have applied it.
	errResponseLost = errors.New("drill: provider response lost")
)

// caller says who reached a provider, through which path, under which
// epoch (the fence the gateway forwarded; the naive gateway forwards the
// worker's own without checking it) and idempotency key.
type caller struct {
	actor string
	epoch int64
	key   string
}

// operator is the caller of an out-of-band human change.
var operatorCaller = caller{actor: "operator"}

// Topology is the database topology's authority (Aurora global database in
// the incident): one writer; PromoteTarget is asynchronous.
type Topology struct {
	s       *sim
	writer  string
	pending *promotion
	byKey   map[string]*promotion
	n       int
	log     []Event
	// dropNext makes the next applied promotion lose its response.
	dropNext bool
	audit    *Audit
	// lookupDownUntil: until then, LookupRequest times out (the lookup
	// outage fault); outageSeen is set once it did.
	lookupDownUntil time.Duration
	outageSeen      bool
}

type promotion struct {
	id, key, target string
	at              time.Duration
	done            bool
}

func newTopology(s *sim, audit *Audit) *Topology {
	return &Topology{s: s, writer: clusterPrimary, byKey: map[string]*promotion{}, audit: audit}
}

func (t *Topology) record(e Event) {
	e.At = t.s.now
	if e.Actor == "" {
		e.Actor = "aurora"
	}
	t.log = append(t.log, e)
	t.s.traj.add(e)
}

// promotionDelay is how long Aurora takes to move the writer.
func (t *Topology) promotionDelay() time.Duration { return t.s.between(4*time.Second, 12*time.Second) }

// Promote asks the provider to make target the writer, idempotent on the
// caller's key within topologyRetention: a repeated key returns the
// original request id and changes nothing. A promotion while another is in
// progress, or of the writer itself, is refused.
func (t *Topology) Promote(c caller, target string) (string, error) {
	t.record(Event{Kind: KindCall, Effect: "PromoteTarget", Epoch: c.epoch, Operation: c.key, Value: target,
		By: c.actor})
	if p, ok := t.byKey[c.key]; ok && c.key != "" && t.s.now-p.at <= topologyRetention {
		t.record(Event{Kind: KindNote, Operation: c.key, Detail: "idempotent replay of " + p.id})
		return p.id, nil
	}
	switch {
	case t.pending != nil:
		t.record(Event{Kind: KindNote, Operation: c.key, Detail: "refused: promotion " + t.pending.id + " in progress"})
		return "", fmt.Errorf("%w: promotion %s in progress", errProviderRefused, t.pending.id)
	case t.writer == target:
		t.record(Event{Kind: KindNote, Operation: c.key, Detail: "refused: " + target + " is already the writer"})
		return "", fmt.Errorf("%w: %s is already the writer", errProviderRefused, target)
	}
	t.n++
	p := &promotion{id: fmt.Sprintf("rds-req-%d", t.n), key: c.key, target: target, at: t.s.now}
	t.byKey[c.key] = p
	t.pending = p
	t.record(Event{Kind: KindApplied, Effect: "promotion-accepted", Operation: c.key, Value: target, Evidence: []string{p.id},
		Epoch: c.epoch, By: c.actor})
	t.audit.emit("PromoteTarget", p.id, c.key)
	t.s.at(t.s.now+t.promotionDelay(), "promotion completes", func() {
		t.writer = target
		p.done = true
		t.pending = nil
		t.record(Event{Kind: KindApplied, Effect: "writer", Operation: c.key, Value: target, Evidence: []string{p.id}})
	})
	if t.dropNext {
		t.dropNext = false
		t.s.traj.add(Event{At: t.s.now, Kind: KindFault, Actor: "network", Effect: string(FaultResponseDropped),
			Operation: c.key, Detail: "PromoteTarget applied; its response is lost"})
		return "", errResponseLost
	}
	return p.id, nil
}

// Describe is the authoritative topology now: the writer, and the target
// of a promotion in progress ("" if none).
func (t *Topology) Describe(c caller) (writer, promoting string) {
	t.record(Event{Kind: KindCall, Effect: "DescribeGlobalCluster", Epoch: c.epoch, By: c.actor})
	if t.pending != nil {
		promoting = t.pending.target
	}
	return t.writer, promoting
}

// errLookupTimeout is the request lookup's answer during an outage: no
// answer, so nothing about the request.
var errLookupTimeout = errors.New("drill: DescribeRequest timed out")

// LookupRequest is the provider's answer, by idempotency key, to whether it
// ever accepted a promotion (its request history, within retention). During
// the lookup outage it times out.
func (t *Topology) LookupRequest(c caller, key string) (*promotion, bool, error) {
	if t.s.now < t.lookupDownUntil {
		if !t.outageSeen {
			t.outageSeen = true
			t.s.traj.add(Event{At: t.s.now, Kind: KindFault, Actor: "aurora", Effect: string(FaultLookupOutage),
				Detail: fmt.Sprintf("request lookup times out until %.0fs", t.lookupDownUntil.Seconds())})
		}
		t.record(Event{Kind: KindCall, Effect: "DescribeRequest", Epoch: c.epoch, Operation: key, By: c.actor, Detail: "timed out"})
		return nil, false, errLookupTimeout
	}
	p, ok := t.lookup(key)
	return p, ok, nil
}

// lookup is the provider's own record of a key (its request history).
func (t *Topology) lookup(key string) (*promotion, bool) {
	p, ok := t.byKey[key]
	if ok && t.s.now-p.at > topologyRetention {
		return nil, false
	}
	return p, ok
}

// operatorPromote is an out-of-band promotion (a human, or the provider's
// managed failover): not through any gateway.
func (t *Topology) operatorPromote(target string) {
	t.record(Event{Kind: KindCall, By: "operator", Effect: "PromoteTarget", Value: target, Detail: "out of band"})
	if t.pending != nil || t.writer == target {
		return
	}
	t.n++
	p := &promotion{id: fmt.Sprintf("rds-req-%d", t.n), key: "operator", target: target, at: t.s.now}
	t.pending = p
	t.record(Event{Kind: KindApplied, Actor: "aurora", Effect: "promotion-accepted", Value: target, Evidence: []string{p.id}, By: "operator"})
	t.audit.emit("PromoteTarget", p.id, "operator")
	t.s.at(t.s.now+t.promotionDelay(), "promotion completes", func() {
		t.writer = target
		p.done = true
		t.pending = nil
		t.record(Event{Kind: KindApplied, Effect: "writer", Value: target, Evidence: []string{p.id}})
	})
}

// Change statuses of the DNS provider.
const (
	statusPending = "PENDING"
	statusInsync  = "INSYNC"
)

// DNS is the traffic record's authority (Route 53 in the incident): change
// batches are accepted PENDING and go INSYNC later, in submission order.
// The record's value is the last accepted change's. A change carries the
// caller's key; a repeated key within dnsRetention returns the original
// change and changes nothing.
type DNS struct {
	s         *sim
	value     string
	changes   []*dnsChange
	byKey     map[string]*dnsChange
	lastSync  time.Duration
	log       []Event
	dropNext  bool
	longDelay bool // DNS change PENDING for long
	audit     *Audit
}

type dnsChange struct {
	id, key, value, by string
	epoch              int64
	submitted, insync  time.Duration
	status             string
}

func newDNS(s *sim, audit *Audit) *DNS {
	return &DNS{s: s, value: clusterPrimary, byKey: map[string]*dnsChange{}, audit: audit}
}

func (d *DNS) record(e Event) {
	e.At = d.s.now
	if e.Actor == "" {
		e.Actor = "route53"
	}
	d.log = append(d.log, e)
	d.s.traj.add(e)
}

// Change submits an UPSERT of the record to value.
func (d *DNS) Change(c caller, value string) (string, string, error) {
	d.record(Event{Kind: KindCall, Effect: "ChangeResourceRecordSets", Epoch: c.epoch, Operation: c.key, Value: value,
		By: c.actor})
	if ch, ok := d.byKey[c.key]; ok && c.key != "" && d.s.now-ch.submitted <= dnsRetention {
		d.record(Event{Kind: KindNote, Operation: c.key, Detail: "idempotent replay of " + ch.id})
		return ch.id, ch.status, nil
	}
	id := d.submit(c, value)
	if d.dropNext {
		d.dropNext = false
		d.s.traj.add(Event{At: d.s.now, Kind: KindFault, Actor: "network", Effect: string(FaultResponseDropped),
			Operation: c.key, Detail: "ChangeResourceRecordSets applied; its response is lost"})
		return "", "", errResponseLost
	}
	return id, statusPending, nil
}

func (d *DNS) submit(c caller, value string) string {
	ch := &dnsChange{id: fmt.Sprintf("C-%d", len(d.changes)+1), key: c.key, value: value, by: c.actor, epoch: c.epoch,
		submitted: d.s.now, status: statusPending}
	d.changes = append(d.changes, ch)
	if c.key != "" {
		d.byKey[c.key] = ch
	}
	from := d.value
	d.value = value
	delay := d.s.between(2*time.Second, 8*time.Second)
	if d.longDelay {
		delay = d.s.between(90*time.Second, 240*time.Second)
	}
	ch.insync = max(d.s.now+delay, d.lastSync) // processed in submission order
	d.lastSync = ch.insync
	d.record(Event{Kind: KindApplied, Effect: "record", Epoch: c.epoch, Operation: c.key, From: from, To: value, Value: value,
		Evidence: []string{ch.id}, By: c.actor, Detail: "PENDING"})
	d.audit.emit("ChangeResourceRecordSets", ch.id, c.key)
	d.s.at(ch.insync, "change insync", func() {
		ch.status = statusInsync
		d.record(Event{Kind: KindApplied, Effect: "insync", Operation: ch.key, Value: ch.value, Evidence: []string{ch.id}})
	})
	return ch.id
}

// GetChange is a change's status, or "" if the id is unknown.
func (d *DNS) GetChange(c caller, id string) string {
	d.record(Event{Kind: KindCall, Effect: "GetChange", Epoch: c.epoch, By: c.actor, Detail: id})
	for _, ch := range d.changes {
		if ch.id == id {
			return ch.status
		}
	}
	return ""
}

// Record is the record's value as the provider's API shows it now.
func (d *DNS) Record(c caller) string {
	d.record(Event{Kind: KindCall, Effect: "ListResourceRecordSets", Epoch: c.epoch, By: c.actor})
	return d.value
}

// lookup is the provider's own record of a key.
func (d *DNS) lookup(key string) (*dnsChange, bool) {
	ch, ok := d.byKey[key]
	if ok && d.s.now-ch.submitted > dnsRetention {
		return nil, false
	}
	return ch, ok
}

// operatorSet is an operator's manual edit of the record.
func (d *DNS) operatorSet(value string) { d.submit(operatorCaller, value) }

// Audit is the providers' audit trail (CloudTrail in the incident): every
// applied call becomes an audit event, delivered after a delay; a fault can
// duplicate or delay events. It corroborates; it is never the authority.
type Audit struct {
	s          *sim
	delivered  []auditEvent
	duplicate  bool
	delayLong  bool
	duplicated bool
	delayed    bool
}

type auditEvent struct {
	method, id, key string
	at              time.Duration
}

func (a *Audit) emit(method, id, key string) {
	delay := a.s.between(1*time.Second, 5*time.Second)
	if a.delayLong {
		delay = a.s.between(60*time.Second, 180*time.Second)
		if !a.delayed {
			a.delayed = true
			a.s.traj.add(Event{At: a.s.now, Kind: KindFault, Actor: "audit", Effect: string(FaultAuditDelayed),
				Detail: fmt.Sprintf("%s %s delivered after %v", method, id, delay)})
		}
	}
	ev := auditEvent{method: method, id: id, key: key}
	a.s.at(a.s.now+delay, "audit delivered", func() {
		ev.at = a.s.now
		a.delivered = append(a.delivered, ev)
		if a.duplicate {
			a.delivered = append(a.delivered, ev)
			if !a.duplicated {
				a.duplicated = true
				a.s.traj.add(Event{At: a.s.now, Kind: KindFault, Actor: "audit", Effect: string(FaultAuditDuplicated),
					Detail: method + " " + id + " delivered twice"})
			}
		}
	})
}

// find returns the audit events of key delivered so far, duplicates
// removed (by provider id).
func (a *Audit) find(method, key string) []string {
	seen := map[string]bool{}
	var ids []string
	for _, e := range a.delivered {
		if e.method == method && e.key == key && !seen[e.id] {
			seen[e.id] = true
			ids = append(ids, e.id)
		}
	}
	return ids
}

// count is how many audit events of method were delivered, duplicates
// included: what a consumer that does not deduplicate would count.
func (a *Audit) count(method string) int {
	n := 0
	for _, e := range a.delivered {
		if e.method == method {
			n++
		}
	}
	return n
}
