package dnsupdate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/leasegate/leasegate/adapters/internal/config"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// Kind is the effect kind the adapter serves by default.
const Kind = "dns.upsert"

// types are the record types the adapter writes.
var types = []string{"A", "AAAA", "CNAME", "TXT"}

// Params are an upsert's parameters: the RRset of Type at the effect's
// Target (a name in the zone) becomes exactly Value, with TTL seconds.
type Params struct {
	Type  string `json:"type"`
	Value string `json:"value"`
	TTL   uint32 `json:"ttl"`
}

// RRset is a record's state as the authoritative server answers it.
type RRset struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Values []string `json:"values"` // sorted; empty: no such RRset
	TTL    uint32   `json:"ttl,omitempty"`
	Serial uint32   `json:"soa_serial"` // the zone's SOA serial at the read
}

// Digest is what an upsert depends on: the RRset's values. TTL and the
// SOA serial stay out (the serial moves with any edit of the zone).
func (r RRset) Digest() string {
	v := "(none)"
	if len(r.Values) > 0 {
		v = strings.Join(r.Values, ",")
	}
	return "dns-rrset-v1;" + r.Name + ";" + r.Type + ";" + v
}

// Adapter upserts records of one zone by RFC 2136 dynamic update, signed
// with TSIG, at the zone's primary authoritative server. It is safe for
// concurrent use.
type Adapter struct {
	kind    string
	server  string
	zone    string
	key     func() (tsigKey, error) // read at every exchange, so a rotated file takes effect
	timeout time.Duration
	now     func() time.Time
	// answered, when set, is called once the server has answered an
	// UPDATE, before Apply reads the zone for its evidence. Tests set it
	// (export_test.go) to edit the zone in that window; nil otherwise.
	answered func()
}

// Option configures New.
type Option func(*Adapter) error

// WithKind serves another effect kind than Kind.
func WithKind(kind string) Option {
	return func(a *Adapter) error {
		if err := coordinator.CheckLabel("kind", kind); err != nil {
			return config.Invalid("dnsupdate", "kind", "%v", err)
		}
		a.kind = kind
		return nil
	}
}

// WithTimeout bounds each exchange with the server (default 5 s).
func WithTimeout(d time.Duration) Option {
	return func(a *Adapter) error {
		if d <= 0 {
			return config.Invalid("dnsupdate", "timeout", "timeout %v must be positive", d)
		}
		a.timeout = d
		return nil
	}
}

// WithClock sets the clock of observation times (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(a *Adapter) error {
		if now == nil {
			return errors.New("nil clock")
		}
		a.now = now
		return nil
	}
}

// New checks the configuration now — when the ledger starts, not at the
// first dispatch — and returns the adapter: server is host:port with an IP
// address or a name that resolves, zone a domain name, keyFile a readable,
// private (config.CheckPrivate) TSIG key in BIND's syntax with a supported
// algorithm. A bad configuration is invalid_input naming the setting
// (server, zone, tsig_key_file); the secret is never logged nor quoted.
func New(server, zone, keyFile string, opts ...Option) (*Adapter, error) {
	if _, err := readKey(keyFile); err != nil {
		return nil, config.Invalid("dnsupdate", "tsig_key_file", "%v", err)
	}
	return newAdapter(server, zone, func() (tsigKey, error) { return readKey(keyFile) }, opts)
}

// Key is a TSIG key given by its name and algorithm, with only its secret
// (base64, one line, as tsig-keygen prints it) in a file of its own.
type Key struct {
	Name       string // the key's name, a domain name ("leasegate-update.")
	Algorithm  string // hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512
	SecretFile string // private (config.CheckPrivate); read at every exchange
}

// NewWithKey is New with the key given as k: name and algorithm in the
// configuration, the secret in k.SecretFile. Bad settings are
// invalid_input naming them (tsig_key_name, tsig_algorithm,
// tsig_secret_file).
func NewWithKey(server, zone string, k Key, opts ...Option) (*Adapter, error) {
	if _, ok := dns.IsDomainName(k.Name); !ok || k.Name == "" {
		return nil, config.Invalid("dnsupdate", "tsig_key_name", "TSIG key name %q is not a domain name", k.Name)
	}
	if _, ok := algorithms[strings.ToLower(k.Algorithm)]; !ok {
		return nil, config.Invalid("dnsupdate", "tsig_algorithm", "TSIG algorithm %q: %s", k.Algorithm, algorithmNames)
	}
	load := func() (tsigKey, error) { return secretKey(k) }
	if _, err := load(); err != nil {
		return nil, config.Invalid("dnsupdate", "tsig_secret_file", "%v", err)
	}
	return newAdapter(server, zone, load, opts)
}

func newAdapter(server, zone string, key func() (tsigKey, error), opts []Option) (*Adapter, error) {
	const op = "dnsupdate"
	a := &Adapter{kind: Kind, server: server, zone: dns.CanonicalName(zone), key: key, timeout: 5 * time.Second, now: time.Now}
	for _, o := range opts {
		if err := o(a); err != nil {
			var fe *config.FieldError
			if errors.As(err, &fe) {
				return nil, err
			}
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	host, port, err := net.SplitHostPort(server)
	if err != nil || port == "" || host == "" {
		return nil, config.Invalid(op, "server", "server %q: want host:port", server)
	}
	if p, err := net.LookupPort("tcp", port); err != nil || p <= 0 {
		return nil, config.Invalid(op, "server", "server %q: bad port", server)
	}
	if err := config.Resolvable(host); err != nil {
		return nil, config.Invalid(op, "server", "server %v", err)
	}
	if _, ok := dns.IsDomainName(a.zone); !ok || zone == "" {
		return nil, config.Invalid(op, "zone", "zone %q is not a domain name", zone)
	}
	return a, nil
}

// Kind is the effect kind served.
func (a *Adapter) Kind() string { return a.kind }

// Contract: Conditional — every UPDATE carries the approved RRset as its
// prerequisite (RFC 2136 2.4.2, "RRset exists, value dependent"; 2.4.3
// when there was none), so the server applies it only in the approved
// world, atomically. No Lookup: an authoritative server keeps no record of
// who sent which update (no change id, unlike Route 53). Not RetrySafe: a
// retry's prerequisite refuses it after the first attempt applied, but
// after an operator put the old value back it would apply again; so the
// ledger does not retry on its own.
func (a *Adapter) Contract() ledger.Contract { return ledger.Contract{Conditional: true} }

// Effect is an upsert of name (in the zone) to value.
func (a *Adapter) Effect(name, typ, value string, ttl uint32, policy string) (ledger.Effect, error) {
	p := Params{Type: strings.ToUpper(typ), Value: value, TTL: ttl}
	if _, err := a.rr(dns.CanonicalName(name), p); err != nil {
		return ledger.Effect{}, store.NewError(store.InvalidInput, "dnsupdate", "", "", fmt.Sprintf("%v", err), nil)
	}
	b, _ := json.Marshal(p)
	return ledger.Effect{Kind: a.kind, Target: dns.CanonicalName(name), Params: b, Policy: policy}, nil
}

// rr is the record an upsert writes.
func (a *Adapter) rr(name string, p Params) (dns.RR, error) {
	if !dns.IsSubDomain(a.zone, name) {
		return nil, fmt.Errorf("%s is not in zone %s", name, a.zone)
	}
	if !slices.Contains(types, p.Type) {
		return nil, fmt.Errorf("type %q: one of %v", p.Type, types)
	}
	if p.Value == "" || strings.ContainsAny(p.Value, "\n;") {
		return nil, fmt.Errorf("value %q", p.Value)
	}
	v := p.Value
	if p.Type == "TXT" {
		v = fmt.Sprintf("%q", p.Value)
	}
	rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", name, p.TTL, p.Type, v))
	if err != nil || rr == nil {
		return nil, fmt.Errorf("record %s %s %s: %v", name, p.Type, p.Value, err)
	}
	return rr, nil
}

func params(e ledger.Effect) (Params, error) {
	var p Params
	if err := json.Unmarshal(e.Params, &p); err != nil {
		return p, fmt.Errorf("parameters: %w", err)
	}
	return p, nil
}

func (a *Adapter) client(k *tsigKey) *dns.Client {
	c := &dns.Client{Net: "tcp", Timeout: a.timeout}
	if k != nil {
		c.TsigSecret = map[string]string{k.name: k.secret}
	}
	return c
}

// Read queries the authoritative server for name's RRset of type typ and
// the zone's SOA serial. An answer without the authoritative bit is an
// error: only the zone's authority counts.
func (a *Adapter) Read(ctx context.Context, name, typ string) (RRset, error) {
	out := RRset{Name: dns.CanonicalName(name), Type: typ, Values: []string{}}
	qt, ok := dns.StringToType[typ]
	if !ok {
		return out, fmt.Errorf("dnsupdate: type %q", typ)
	}
	c := a.client(nil)
	ask := func(n string, t uint16) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(n, t)
		r, _, err := c.ExchangeContext(ctx, m, a.server)
		switch {
		case err != nil:
			return nil, fmt.Errorf("dnsupdate: query %s %s: %w", n, dns.TypeToString[t], err)
		case !r.Authoritative:
			return nil, fmt.Errorf("dnsupdate: %s is not authoritative for %s", a.server, n)
		case r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError:
			return nil, fmt.Errorf("dnsupdate: query %s %s: %s", n, dns.TypeToString[t], dns.RcodeToString[r.Rcode])
		}
		return r, nil
	}
	r, err := ask(out.Name, qt)
	if err != nil {
		return out, err
	}
	for _, rr := range r.Answer {
		if rr.Header().Rrtype == qt && dns.CanonicalName(rr.Header().Name) == out.Name {
			out.Values = append(out.Values, rdata(rr))
			out.TTL = rr.Header().Ttl
		}
	}
	slices.Sort(out.Values)
	soa, err := ask(a.zone, dns.TypeSOA)
	if err != nil {
		return out, err
	}
	for _, rr := range soa.Answer {
		if s, ok := rr.(*dns.SOA); ok {
			out.Serial = s.Serial
		}
	}
	return out, nil
}

// rdata is an RR's data as zone-file text (the value).
func rdata(rr dns.RR) string {
	if t, ok := rr.(*dns.TXT); ok {
		return strings.Join(t.Txt, "")
	}
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

// Precondition is the record's RRset now, from the authoritative server.
func (a *Adapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	p, err := params(e)
	if err != nil {
		return ledger.Observation{}, err
	}
	r, err := a.Read(ctx, e.Target, p.Type)
	if err != nil {
		return ledger.Observation{}, err
	}
	d, _ := json.Marshal(r)
	return ledger.Observation{Digest: r.Digest(), At: a.now().UTC(), Detail: d}, nil
}

// approved is the RRset an observation recorded.
func approved(o ledger.Observation) (RRset, error) {
	var r RRset
	if err := json.Unmarshal(o.Detail, &r); err != nil || r.Name == "" {
		return r, errors.New("dnsupdate: the approved precondition does not record the RRset")
	}
	return r, nil
}

// Apply sends one signed UPDATE: prerequisite, the approved RRset exactly
// (or that there was none); update, delete the RRset and add the new
// record. The server applies both or neither (RFC 2136 3.4).
//
//   - NOERROR: applied; evidence this update's own step of the zone's
//     history, "serial From->To" (change, as Observe identifies it), and
//     the values read after. Without that step in the history, no serial:
//     the one read after may be a later edit's (appliedEvidence).
//   - NXRRSET, YXRRSET, NXDOMAIN, YXDOMAIN (a prerequisite failed — an
//     operator's edit in between), REFUSED, NOTAUTH (a bad key), NOTZONE,
//     FORMERR, NOTIMP: refused, nothing applied; evidence the RRset now.
//   - no connection (nothing sent): refused.
//   - a timeout or a lost connection after the UPDATE was written, a
//     SERVFAIL, an answer whose TSIG does not verify: ambiguous.
func (a *Adapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	e := call.Effect
	p, err := params(e)
	if err != nil {
		return ledger.Evidence{}, ledger.Refused(err.Error(), a.said("not sent: "+err.Error()))
	}
	rr, err := a.rr(e.Target, p)
	if err != nil {
		return ledger.Evidence{}, ledger.Refused(err.Error(), a.said("not sent: "+err.Error()))
	}
	was, err := approved(call.Approved)
	if err != nil {
		return ledger.Evidence{}, ledger.Refused(err.Error(), a.said("not sent: "+err.Error()))
	}
	key, err := a.key()
	if err != nil {
		return ledger.Evidence{}, ledger.Refused(err.Error(), a.said("not sent: "+err.Error()))
	}
	m := new(dns.Msg)
	m.SetUpdate(a.zone)
	if len(was.Values) == 0 {
		m.RRsetNotUsed([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: e.Target, Rrtype: rr.Header().Rrtype, Class: dns.ClassINET}}})
	} else {
		var pre []dns.RR
		for _, v := range was.Values {
			old, err := a.rr(e.Target, Params{Type: p.Type, Value: v})
			if err != nil {
				return ledger.Evidence{}, ledger.Refused("approved value: "+err.Error(), a.said("not sent"))
			}
			pre = append(pre, old)
		}
		m.Used(pre)
	}
	m.RemoveRRset([]dns.RR{rr})
	m.Insert([]dns.RR{rr})
	m.SetTsig(key.name, key.algorithm, 300, time.Now().Unix())

	c := a.client(&key)
	co, err := c.DialContext(ctx, a.server)
	if err != nil {
		return ledger.Evidence{}, ledger.Refused("no connection to "+a.server+"; nothing sent: "+err.Error(), a.said("not sent: "+err.Error()))
	}
	defer co.Close()
	r, _, err := c.ExchangeWithConnContext(ctx, m, co)
	if err != nil {
		return ledger.Evidence{}, ledger.Ambiguous(fmt.Errorf("dnsupdate: UPDATE %s %s: %w", e.Target, p.Type, err))
	}
	if a.answered != nil {
		a.answered()
	}
	now, rerr := a.Read(ctx, e.Target, p.Type)
	switch r.Rcode {
	case dns.RcodeSuccess:
		return a.appliedEvidence(ctx, r, was, rr, now, rerr), nil
	}
	ev := a.evidence(r, now, rerr)
	switch r.Rcode {
	case dns.RcodeNXRrset, dns.RcodeYXRrset, dns.RcodeNameError, dns.RcodeYXDomain:
		return ledger.Evidence{}, ledger.Refused(fmt.Sprintf("%s: the RRset is no longer the approved %s (now %s)",
			dns.RcodeToString[r.Rcode], was.Digest(), now.Digest()), ev)
	case dns.RcodeRefused, dns.RcodeNotAuth, dns.RcodeNotZone, dns.RcodeFormatError, dns.RcodeNotImplemented:
		return ledger.Evidence{}, ledger.Refused(dns.RcodeToString[r.Rcode]+" from "+a.server, ev)
	}
	return ev, ledger.Ambiguous(fmt.Errorf("dnsupdate: UPDATE answered %s", dns.RcodeToString[r.Rcode]))
}

// appliedEvidence is the evidence of an UPDATE the server answered
// NOERROR: its answer, the RRset read after it, and this update's own
// step of the zone's history (change, as Observe finds it), "zone serial
// From->To". The serial read after the answer is not this update's: an
// operator's nsupdate landing in between has moved it on. So where the
// history does not show the step (no journal from the approved serial,
// trimmed, unreadable, or an update that changed nothing), no serial is
// cited: the answer alone is the evidence, and the detail says why.
func (a *Adapter) appliedEvidence(ctx context.Context, r *dns.Msg, was RRset, want dns.RR, now RRset, readErr error) ledger.Evidence {
	d := map[string]any{"rcode": dns.RcodeToString[r.Rcode], "message_id": r.Id, "rrset": now}
	if readErr != nil {
		d["read_error"] = readErr.Error()
	}
	ev := ledger.Evidence{At: a.now().UTC()}
	st, n, herr := a.change(ctx, was, want)
	switch {
	case herr != nil:
		d["history_error"] = herr.Error()
	case st == nil:
		d["history_changes"] = n
		d["history"] = fmt.Sprintf("no change of the zone since serial %d deleted exactly %v and added %s", was.Serial, was.Values, rdata(want))
	default:
		d["history_changes"] = n
		d["change"] = fmt.Sprintf("serial %d -> %d", st.From, st.To)
		ev.ProviderIDs = []string{a.changeID(st)}
	}
	if st == nil {
		d["serial_note"] = "no serial is cited as this update's: the zone's serial was read after the answer and may be a later change's"
	}
	ev.Detail, _ = json.Marshal(d)
	return ev
}

// evidence is a refused UPDATE's: the server's answer and the RRset read
// after it, citing the zone's serial at that read (the state seen, not a
// change made).
func (a *Adapter) evidence(r *dns.Msg, now RRset, readErr error) ledger.Evidence {
	d := map[string]any{"rcode": dns.RcodeToString[r.Rcode], "message_id": r.Id, "rrset": now}
	if readErr != nil {
		d["read_error"] = readErr.Error()
	}
	b, _ := json.Marshal(d)
	ev := ledger.Evidence{Detail: b, At: a.now().UTC()}
	if readErr == nil {
		ev.ProviderIDs = []string{fmt.Sprintf("%s serial %d", a.zone, now.Serial)}
	}
	return ev
}

func (a *Adapter) said(what string) ledger.Evidence {
	b, _ := json.Marshal(map[string]string{"adapter": what})
	return ledger.Evidence{Detail: b, At: a.now().UTC()}
}

// Observe asks the authoritative server. First the zone's own history
// since the approved serial (IXFR, History): a change that deleted exactly
// the approved RRset and added the wanted record is this upsert — Applied,
// the serials as evidence, even if someone changed the record after it;
// no such change is NotApplied (the ledger reads it as "not so far": no
// lookup by id). Where the server keeps no history from that serial, the
// RRset now decides: the wanted value is Applied, the approved one
// NotApplied, and a third value Inconclusive — someone else wrote the
// record, and its value cannot say whether this update landed before them.
func (a *Adapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	p, err := params(rec.Effect)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	want, err := a.rr(rec.Effect.Target, p)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	was, err := approved(rec.Precondition)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	now, err := a.Read(ctx, rec.Effect.Target, p.Type)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	st, n, herr := a.change(ctx, was, want)
	detail := map[string]any{"rrset": now, "approved": was}
	if herr == nil {
		detail["history_changes"] = n
		if st != nil {
			detail["change"] = fmt.Sprintf("serial %d -> %d", st.From, st.To)
			b, _ := json.Marshal(detail)
			return ledger.Applied, ledger.Evidence{Detail: b, At: a.now().UTC(), ProviderIDs: []string{a.changeID(st)}}, nil
		}
		b, _ := json.Marshal(detail)
		return ledger.NotApplied, ledger.Evidence{Detail: b, At: a.now().UTC(),
			ProviderIDs: []string{fmt.Sprintf("%s serial %d", a.zone, now.Serial)}}, nil
	}
	detail["history_error"] = herr.Error()
	b, _ := json.Marshal(detail)
	ev := ledger.Evidence{Detail: b, At: a.now().UTC(), ProviderIDs: []string{fmt.Sprintf("%s serial %d", a.zone, now.Serial)}}
	switch {
	case slices.Equal(now.Values, []string{rdata(want)}):
		return ledger.Applied, ev, nil
	case now.Digest() == was.Digest():
		return ledger.NotApplied, ev, nil
	}
	return ledger.Inconclusive, ev, fmt.Errorf("dnsupdate: %s holds %v, neither the approved %v nor the wanted %s, and the server shows no history: %v",
		now.Name, now.Values, was.Values, rdata(want), herr)
}

// Probe asks the server for the zone's SOA, signed with the TSIG key:
// nil when it answers with authority and accepts the key, else an error
// saying which of those failed (no answer, NOTAUTH for a key it does not
// know, a signature that does not verify). It changes nothing. `leasegate
// serve` shows it as the adapter's health.
func (a *Adapter) Probe(ctx context.Context) error {
	key, err := a.key()
	if err != nil {
		return fmt.Errorf("dnsupdate: %w", err)
	}
	m := new(dns.Msg)
	m.SetQuestion(a.zone, dns.TypeSOA)
	m.SetTsig(key.name, key.algorithm, 300, time.Now().Unix())
	r, _, err := a.client(&key).ExchangeContext(ctx, m, a.server)
	switch {
	case errors.Is(err, dns.ErrAuth) || errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrTime):
		return fmt.Errorf("dnsupdate: %s refused the TSIG key %s (or its answer's signature does not verify): %w", a.server, key.name, err)
	case err != nil:
		return fmt.Errorf("dnsupdate: SOA %s at %s: %w", a.zone, a.server, err)
	case r.Rcode != dns.RcodeSuccess:
		return fmt.Errorf("dnsupdate: SOA %s at %s: %s", a.zone, a.server, dns.RcodeToString[r.Rcode])
	case !r.Authoritative:
		return fmt.Errorf("dnsupdate: %s is not authoritative for %s", a.server, a.zone)
	}
	return nil
}
