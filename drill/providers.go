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
	// staticFallback is the read-only static checkout an operator may
	// route the record to by hand.
	staticFallback = "static-fallback"
	// recordName is the checkout record traffic follows.
	recordName = "checkout.northstar.example"
)

// dnsRetention is how long the DNS provider remembers a change's
// idempotency key (its declared contract: lookup by id).
const dnsRetention = 24 * time.Hour

// auditBound is the longest the database adapter assumes the audit trail
// takes to deliver an accepted request's event (the simulated trail takes
// 1-5 s, or 60-180 s when delayed): a request with no event after it, and
// no trace in the topology, was never accepted.
const auditBound = 5 * time.Minute

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

// topology is the database topology's authority (Aurora global database in
// the incident): one writer; PromoteTarget is asynchronous. Like Aurora it
// takes no idempotency key and cannot be asked whether it ever accepted a
// request: what it shows is the topology now, and the audit trail shows
// the calls it accepted.
type topology struct {
	s       *sim
	writer  string
	pending *promotion
	n       int
	log     []Event
	// lag is the replication lag to the secondary; lagOver..lagBack it
	// exceeds the loss bound.
	lagOver, lagBack time.Duration
	lagSeen          bool
	// dropNext makes the next applied promotion lose its response.
	dropNext bool
	audit    *auditTrail
	// lookupDownUntil: until then, the audit trail's lookup times out (the
	// lookup outage fault); outageSeen is set once it did.
	lookupDownUntil time.Duration
	outageSeen      bool
}

type promotion struct {
	id, target string
	at         time.Duration
	done       bool
}

func newTopology(s *sim, audit *auditTrail) *topology {
	return &topology{s: s, writer: clusterPrimary, audit: audit}
}

func (t *topology) record(e Event) {
	e.At = t.s.now
	if e.Actor == "" {
		e.Actor = "aurora"
	}
	t.log = append(t.log, e)
	t.s.traj.add(e)
}

// promotionDelay is how long Aurora takes to move the writer.
func (t *topology) promotionDelay() time.Duration {
	if t.s.script != nil {
		return t.s.script.promotionDelay
	}
	return t.s.between(4*time.Second, 12*time.Second)
}

// Promote asks the provider to make target the writer. It takes no
// idempotency key (the caller's key travels only as the audit trail's
// session name); a promotion while another is in progress, or of the writer
// itself, is refused.
func (t *topology) Promote(c caller, target string) (string, error) {
	t.record(Event{Kind: KindCall, Effect: "PromoteTarget", Epoch: c.epoch, Operation: c.key, Value: target,
		By: c.actor})
	switch {
	case t.pending != nil:
		t.record(Event{Kind: KindNote, Operation: c.key, Detail: "refused: promotion " + t.pending.id + " in progress"})
		return "", fmt.Errorf("%w: promotion %s in progress", errProviderRefused, t.pending.id)
	case t.writer == target:
		t.record(Event{Kind: KindNote, Operation: c.key, Detail: "refused: " + target + " is already the writer"})
		return "", fmt.Errorf("%w: %s is already the writer", errProviderRefused, target)
	}
	t.n++
	p := &promotion{id: fmt.Sprintf("rds-req-%d", t.n), target: target, at: t.s.now}
	t.pending = p
	t.record(Event{Kind: KindApplied, Effect: "promotion-accepted", Operation: c.key, Value: target, Evidence: []string{p.id},
		Epoch: c.epoch, By: c.actor})
	t.audit.emit("PromoteTarget", p.id, c.key, target)
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
func (t *topology) Describe(c caller) (writer, promoting string) {
	t.record(Event{Kind: KindCall, Effect: "DescribeGlobalCluster", Epoch: c.epoch, By: c.actor})
	if t.pending != nil {
		promoting = t.pending.target
	}
	return t.writer, promoting
}

// Lag is the replication lag to the secondary now, as the provider's
// metrics show it.
func (t *topology) Lag(c caller) time.Duration {
	t.record(Event{Kind: KindCall, Effect: "ReplicationLag", Epoch: c.epoch, By: c.actor})
	if t.s.now >= t.lagOver && t.s.now < t.lagBack {
		if !t.lagSeen {
			t.lagSeen = true
			t.s.traj.add(Event{At: t.s.now, Kind: KindFault, Actor: "aurora", Effect: string(FaultLagExceeded),
				Detail: fmt.Sprintf("replication lag 8s, past the loss bound, until %.0fs", t.lagBack.Seconds())})
		}
		return 8 * time.Second
	}
	return 2 * time.Second
}

// errLookupTimeout is the audit trail's lookup answer during an outage: no
// answer, so nothing about the request.
var errLookupTimeout = errors.New("drill: LookupEvents timed out")

// LookupEvents is the audit trail's answer (CloudTrail's LookupEvents):
// the accepted calls of method made under session (the gateway's role
// session name, which it sets to the operation id), delivered so far,
// duplicates removed. During the lookup outage it times out.
func (t *topology) LookupEvents(c caller, method, session string) ([]string, error) {
	if t.s.now < t.lookupDownUntil {
		if !t.outageSeen {
			t.outageSeen = true
			t.s.traj.add(Event{At: t.s.now, Kind: KindFault, Actor: "audit", Effect: string(FaultLookupOutage),
				Detail: fmt.Sprintf("the audit trail's lookup times out until %.0fs", t.lookupDownUntil.Seconds())})
		}
		t.s.traj.add(Event{At: t.s.now, Kind: KindCall, Actor: "audit", Effect: "LookupEvents", Epoch: c.epoch,
			Operation: session, By: c.actor, Detail: "timed out"})
		return nil, errLookupTimeout
	}
	t.s.traj.add(Event{At: t.s.now, Kind: KindCall, Actor: "audit", Effect: "LookupEvents", Epoch: c.epoch,
		Operation: session, By: c.actor})
	return t.audit.find(method, session), nil
}

// operatorPromote is an out-of-band promotion (a human, or the provider's
// managed failover): not through any gateway.
func (t *topology) operatorPromote(target string) {
	t.record(Event{Kind: KindCall, By: "operator", Effect: "PromoteTarget", Value: target, Detail: "out of band"})
	if t.pending != nil || t.writer == target {
		return
	}
	t.n++
	p := &promotion{id: fmt.Sprintf("rds-req-%d", t.n), target: target, at: t.s.now}
	t.pending = p
	t.record(Event{Kind: KindApplied, Actor: "aurora", Effect: "promotion-accepted", Value: target, Evidence: []string{p.id}, By: "operator"})
	t.audit.emit("PromoteTarget", p.id, "operator", target)
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

// dns is the traffic record's authority (Route 53 in the incident): change
// batches are accepted PENDING and go INSYNC later, in submission order.
// The record's value is the last accepted change's. A change carries the
// caller's key; a repeated key within dnsRetention returns the original
// change and changes nothing.
type dns struct {
	s         *sim
	value     string
	changes   []*dnsChange
	byKey     map[string]*dnsChange
	lastSync  time.Duration
	log       []Event
	dropNext  bool
	longDelay bool // DNS change PENDING for long
	audit     *auditTrail
}

type dnsChange struct {
	id, key, value, by string
	epoch              int64
	submitted, insync  time.Duration
	status             string
}

func newDNS(s *sim, audit *auditTrail) *dns {
	return &dns{s: s, value: clusterPrimary, byKey: map[string]*dnsChange{}, audit: audit}
}

func (d *dns) record(e Event) {
	e.At = d.s.now
	if e.Actor == "" {
		e.Actor = "route53"
	}
	d.log = append(d.log, e)
	d.s.traj.add(e)
}

// Change submits an UPSERT of the record to value. With a prerequisite
// (not ""), the provider applies it only if the record's value is that
// one, and refuses it otherwise: nothing changes.
func (d *dns) Change(c caller, value, prerequisite string) (string, string, error) {
	d.record(Event{Kind: KindCall, Effect: "ChangeResourceRecordSets", Epoch: c.epoch, Operation: c.key, Value: value,
		By: c.actor})
	if ch, ok := d.byKey[c.key]; ok && c.key != "" && d.s.now-ch.submitted <= dnsRetention {
		d.record(Event{Kind: KindNote, Operation: c.key, Detail: "idempotent replay of " + ch.id})
		return ch.id, ch.status, nil
	}
	if prerequisite != "" && prerequisite != d.value {
		d.record(Event{Kind: KindNote, Operation: c.key, Detail: "refused: prerequisite record=" + prerequisite + ", it is " + d.value})
		return "", "", fmt.Errorf("%w: the record is %s, not %s", errProviderRefused, d.value, prerequisite)
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

func (d *dns) submit(c caller, value string) string {
	id := fmt.Sprintf("C-%d", len(d.changes)+1)
	if d.s.script != nil {
		id = d.s.script.changeID(c.actor, len(d.changes)+1)
	}
	ch := &dnsChange{id: id, key: c.key, value: value, by: c.actor, epoch: c.epoch,
		submitted: d.s.now, status: statusPending}
	d.changes = append(d.changes, ch)
	if c.key != "" {
		d.byKey[c.key] = ch
	}
	from := d.value
	d.value = value
	delay := d.s.between(2*time.Second, 8*time.Second)
	if d.s.script != nil {
		delay = d.s.script.dnsDelay
	}
	if d.longDelay {
		delay = d.s.between(90*time.Second, 240*time.Second)
	}
	ch.insync = max(d.s.now+delay, d.lastSync) // processed in submission order
	d.lastSync = ch.insync
	d.record(Event{Kind: KindApplied, Effect: "record", Epoch: c.epoch, Operation: c.key, From: from, To: value, Value: value,
		Evidence: []string{ch.id}, By: c.actor, Detail: "PENDING"})
	d.audit.emit("ChangeResourceRecordSets", ch.id, c.key, value)
	d.s.at(ch.insync, "change insync", func() {
		ch.status = statusInsync
		d.record(Event{Kind: KindApplied, Effect: "insync", Operation: ch.key, Value: ch.value, Evidence: []string{ch.id}})
	})
	return ch.id
}

// GetChange is a change's status, or "" if the id is unknown.
func (d *dns) GetChange(c caller, id string) string {
	d.record(Event{Kind: KindCall, Effect: "GetChange", Epoch: c.epoch, By: c.actor, Detail: id})
	for _, ch := range d.changes {
		if ch.id == id {
			return ch.status
		}
	}
	return ""
}

// Record is the record's value as the provider's API shows it now.
func (d *dns) Record(c caller) string {
	d.record(Event{Kind: KindCall, Effect: "ListResourceRecordSets", Epoch: c.epoch, By: c.actor})
	return d.value
}

// lookup is the provider's own record of a key.
func (d *dns) lookup(key string) (*dnsChange, bool) {
	ch, ok := d.byKey[key]
	if ok && d.s.now-ch.submitted > dnsRetention {
		return nil, false
	}
	return ch, ok
}

// last is the newest change the provider accepted (nil: none).
func (d *dns) last() *dnsChange {
	if len(d.changes) == 0 {
		return nil
	}
	return d.changes[len(d.changes)-1]
}

// operatorSet is an operator's manual edit of the record.
func (d *dns) operatorSet(value string) { d.submit(operatorCaller, value) }

// auditTrail is the providers' audit trail (CloudTrail in the incident): every
// applied call becomes an audit event, delivered after a delay; a fault can
// duplicate or delay events. It corroborates; it is never the authority.
type auditTrail struct {
	s          *sim
	delivered  []auditEvent
	duplicate  bool
	delayLong  bool
	duplicated bool
	delayed    bool
}

type auditEvent struct {
	method, id, key, target string
	at                      time.Duration
}

// emit delivers the audit event of an accepted call: method, the
// provider's id, the caller's session (the operation id; "operator" for a
// human) and the call's target.
func (a *auditTrail) emit(method, id, key, target string) {
	delay := a.s.between(1*time.Second, 5*time.Second)
	if a.s.script != nil {
		delay = a.s.script.auditDelay
	}
	if a.delayLong {
		delay = a.s.between(60*time.Second, 180*time.Second)
		if !a.delayed {
			a.delayed = true
			a.s.traj.add(Event{At: a.s.now, Kind: KindFault, Actor: "audit", Effect: string(FaultAuditDelayed),
				Detail: fmt.Sprintf("%s %s delivered after %v", method, id, delay)})
		}
	}
	ev := auditEvent{method: method, id: id, key: key, target: target}
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
func (a *auditTrail) find(method, key string) []string {
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
func (a *auditTrail) count(method string) int {
	n := 0
	for _, e := range a.delivered {
		if e.method == method {
			n++
		}
	}
	return n
}
