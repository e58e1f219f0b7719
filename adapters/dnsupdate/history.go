package dnsupdate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/miekg/dns"
)

// Step is one change of the zone as its journal records it: the serial
// before and after, and the records deleted and added.
type Step struct {
	From, To uint32
	Deleted  []dns.RR
	Added    []dns.RR
}

// errNoJournal: the server answered the IXFR with the whole zone, so it
// keeps no history from that serial (no journal, or it was trimmed).
var errNoJournal = errors.New("dnsupdate: the server keeps no incremental history from that serial")

// History asks the primary for the zone's changes since serial (IXFR,
// RFC 1995, signed with the TSIG key): the zone's own journal, the one
// record an authoritative server keeps of what changed and in which
// order. An empty history means nothing changed since serial.
func (a *Adapter) History(ctx context.Context, serial uint32) ([]Step, error) {
	key, err := a.key()
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetIxfr(a.zone, serial, "ns1."+a.zone, "hostmaster."+a.zone)
	m.SetTsig(key.name, key.algorithm, 300, a.now().Unix())
	t := &dns.Transfer{TsigSecret: map[string]string{key.name: key.secret},
		DialTimeout: a.timeout, ReadTimeout: a.timeout, WriteTimeout: a.timeout}
	// dns.Transfer takes no context: its timeouts bound the exchange.
	_ = ctx
	env, err := t.In(m, a.server)
	if err != nil {
		return nil, fmt.Errorf("dnsupdate: IXFR: %w", err)
	}
	var rrs []dns.RR
	var last error
	for e := range env {
		if e.Error != nil && last == nil {
			last = e.Error
		}
		rrs = append(rrs, e.RR...)
	}
	if last != nil {
		return nil, fmt.Errorf("dnsupdate: IXFR: %w", last)
	}
	return parseIXFR(rrs)
}

// parseIXFR reads an IXFR answer: SOA(new), then for each change SOA(old)
// deleted… SOA(new) added…, and SOA(new) again at the end. A lone SOA is
// "nothing changed"; a second record that is not a SOA is a whole zone.
func parseIXFR(rrs []dns.RR) ([]Step, error) {
	if len(rrs) == 0 {
		return nil, errors.New("dnsupdate: IXFR: empty answer")
	}
	if _, ok := rrs[0].(*dns.SOA); !ok {
		return nil, errors.New("dnsupdate: IXFR: the answer does not start with the SOA")
	}
	if len(rrs) == 1 {
		return nil, nil
	}
	if _, ok := rrs[1].(*dns.SOA); !ok {
		return nil, errNoJournal
	}
	var steps []Step
	var cur *Step
	deleting := false
	for _, rr := range rrs[1 : len(rrs)-1] {
		if soa, ok := rr.(*dns.SOA); ok {
			if !deleting {
				steps = append(steps, Step{From: soa.Serial})
				cur, deleting = &steps[len(steps)-1], true
			} else {
				cur.To, deleting = soa.Serial, false
			}
			continue
		}
		if cur == nil {
			return nil, errors.New("dnsupdate: IXFR: a record before the first change")
		}
		if deleting {
			cur.Deleted = append(cur.Deleted, rr)
		} else {
			cur.Added = append(cur.Added, rr)
		}
	}
	return steps, nil
}

// change is this upsert's step in the zone's history since the approved
// serial (History from approved.Serial): the first step that deleted
// exactly the approved values of want's name and type (all of them) and
// added want. It is nil when the history has no such step; read is how
// many steps the history held. An error says the history could not be
// read (no journal from that serial, trimmed, no answer): then nothing
// can be said of which step, if any, was this upsert.
//
// Both Apply (naming the change its answered UPDATE made) and Observe
// (finding whether it was made) identify it here, so they cite the same
// step. Like Observe's Applied, it cannot tell an operator's identical
// edit from this upsert; but a later edit of the record, which moves the
// zone's serial past this step, is never taken for it.
func (a *Adapter) change(ctx context.Context, approved RRset, want dns.RR) (step *Step, read int, err error) {
	steps, err := a.History(ctx, approved.Serial)
	if err != nil {
		return nil, 0, err
	}
	name, qt := dns.CanonicalName(want.Header().Name), want.Header().Rrtype
	for i := range steps {
		if applies(steps[i], name, qt, approved.Values, rdata(want)) {
			return &steps[i], len(steps), nil
		}
	}
	return nil, len(steps), nil
}

// changeID is a step's evidence: the zone and its serials, "example.test.
// serial 27->28".
func (a *Adapter) changeID(st *Step) string {
	return fmt.Sprintf("%s serial %d->%d", a.zone, st.From, st.To)
}

// applies reports whether step is this upsert: it deletes exactly the
// approved values of name/type (all of them) and adds the wanted one.
func applies(step Step, name string, qt uint16, approved []string, wanted string) bool {
	var del, add []string
	for _, rr := range step.Deleted {
		if rr.Header().Rrtype == qt && dns.CanonicalName(rr.Header().Name) == name {
			del = append(del, rdata(rr))
		}
	}
	for _, rr := range step.Added {
		if rr.Header().Rrtype == qt && dns.CanonicalName(rr.Header().Name) == name {
			add = append(add, rdata(rr))
		}
	}
	slices.Sort(del)
	return slices.Equal(del, approved) && slices.Equal(add, []string{wanted})
}
