package dnsupdate_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/adaptertest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

const name = "checkout.example.test."

// world is a real named, the adapter reaching it through a proxy that can
// cut or swallow the signed UPDATE, and the ledger.
type world struct {
	srv   *realprov.DNSServer
	proxy *realprov.CutProxy
	ad    *dnsupdate.Adapter
	cnt   *adaptertest.Counting
	env   *adaptertest.Env
}

func newWorld(t *testing.T) *world { return newWorldWith(t, false) }

func newWorldWith(t *testing.T, noHistory bool) *world {
	t.Helper()
	return newWorldOf(t, realprov.DNSConfig{Records: []string{"checkout 60 IN A 10.0.0.1"}, NoHistory: noHistory})
}

func newWorldOf(t *testing.T, cfg realprov.DNSConfig) *world {
	t.Helper()
	srv := realprov.NewDNSServerWith(t, cfg)
	proxy, err := realprov.NewCutProxy(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	ad, err := dnsupdate.New(proxy.Addr(), srv.Zone, srv.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cnt := &adaptertest.Counting{Adapter: ad}
	return &world{srv: srv, proxy: proxy, ad: ad, cnt: cnt, env: adaptertest.New(t, []ledger.Adapter{cnt})}
}

func (w *world) effect(t *testing.T, value string) ledger.Effect {
	t.Helper()
	e, err := w.ad.Effect(name, "A", value, 60, "failover-v3")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// value is the record's value as the server answers it now.
func (w *world) value(t *testing.T) string {
	t.Helper()
	r, err := w.srv.Query(w.env.Ctx, name, dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			vs = append(vs, a.A.String())
		}
	}
	return strings.Join(vs, ",")
}

// the signed UPDATE carries the key's name; queries are unsigned.
const updateOnTheWire = "leasegate-update"

func TestUpdateApplied(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Confirmed || w.value(t) != "10.0.0.2" {
		t.Fatalf("state %s, value %s; want CONFIRMED and 10.0.0.2", rec.State, w.value(t))
	}
	if want := []string{w.srv.Zone + " serial 1->2"}; rec.Evidence == nil || !slices.Equal(rec.Evidence.ProviderIDs, want) {
		t.Fatalf("evidence %+v, want the update's change %q", rec.Evidence, want)
	}
	// The zone's history since the approved serial holds this one change,
	// and no more (its closing SOA is not a change of its own).
	if d := string(rec.Evidence.Detail); !strings.Contains(d, `"history_changes":1,`) {
		t.Fatalf("detail %s, want a history of exactly one change", d)
	}
}

// The approved RRset holds two values, which the zone's journal lists as
// deleted in its own order (10.0.0.9 before 10.0.0.10 by their bytes),
// not the approved one (sorted as text: 10.0.0.10 first). The update's
// step is found all the same, and cited.
func TestApprovedRRsetOfSeveralValuesFindsItsStep(t *testing.T) {
	w := newWorldOf(t, realprov.DNSConfig{Records: []string{"checkout 60 IN A 10.0.0.9", "checkout 60 IN A 10.0.0.10"}})
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Confirmed || w.value(t) != "10.0.0.2" {
		t.Fatalf("state %s, value %s; want CONFIRMED and 10.0.0.2", rec.State, w.value(t))
	}
	if want := []string{w.srv.Zone + " serial 1->2"}; rec.Evidence == nil || !slices.Equal(rec.Evidence.ProviderIDs, want) {
		t.Fatalf("evidence %v, want the update's change %q", evidenceText(rec.Evidence), want)
	}
}

// After the server answered, an operator puts the old value back and then
// repeats the very same upsert (1->2 this update, 2->3 back, 3->4 the
// same change again). The evidence is this update's step, the first one
// in the history, never the operator's identical later one.
func TestOperatorRepeatingTheUpsertLaterIsNotCitedAsTheUpdate(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	dnsupdate.SetAnsweredHook(w.ad, func() {
		w.operatorEdit(t, "10.0.0.1")
		w.operatorEdit(t, "10.0.0.2")
	})
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Confirmed || w.value(t) != "10.0.0.2" {
		t.Fatalf("state %s, value %s; want CONFIRMED and 10.0.0.2", rec.State, w.value(t))
	}
	if want := []string{w.srv.Zone + " serial 1->2"}; rec.Evidence == nil || !slices.Equal(rec.Evidence.ProviderIDs, want) {
		t.Fatalf("evidence %v, want exactly %q: the update's own change, not the operator's repeat 3->4", evidenceText(rec.Evidence), want)
	}
}

// An operator's nsupdate lands right after the server answered the
// adapter's UPDATE, before the adapter reads the zone for its evidence:
// the zone's serial is then the operator's (3), not the one this update
// made (2). The evidence names this update's own step of the zone's
// history, 1->2, never the operator's serial.
func TestOperatorEditAfterTheAnswerIsNotCitedAsTheUpdate(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	dnsupdate.SetAnsweredHook(w.ad, func() { w.operatorEdit(t, "10.0.0.9") })
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Confirmed || w.value(t) != "10.0.0.9" {
		t.Fatalf("state %s, value %s; want CONFIRMED and the operator's 10.0.0.9", rec.State, w.value(t))
	}
	if want := []string{w.srv.Zone + " serial 1->2"}; rec.Evidence == nil || !slices.Equal(rec.Evidence.ProviderIDs, want) {
		t.Fatalf("evidence %+v, want exactly %q: the update's own change, not the operator's serial 3", rec.Evidence, want)
	}
}

// The same race where the server keeps no history: the NOERROR answer is
// the evidence the update applied, and no serial is cited as its change —
// the serial read after it may be the operator's, and the detail says so.
func TestWithoutHistoryTheAnsweredUpdateCitesNoSerial(t *testing.T) {
	w := newWorldWith(t, true)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	dnsupdate.SetAnsweredHook(w.ad, func() { w.operatorEdit(t, "10.0.0.9") })
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Confirmed || rec.Evidence == nil {
		t.Fatalf("state %s, evidence %+v; want CONFIRMED on the NOERROR answer", rec.State, rec.Evidence)
	}
	if len(rec.Evidence.ProviderIDs) != 0 {
		t.Fatalf("provider ids %q: no serial can be named as this update's change", rec.Evidence.ProviderIDs)
	}
	var d struct {
		Rcode   string          `json:"rcode"`
		Change  string          `json:"change"`
		After   dnsupdate.RRset `json:"rrset"`
		History string          `json:"history_error"`
		Note    string          `json:"serial_note"`
	}
	if err := json.Unmarshal(rec.Evidence.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if d.Rcode != "NOERROR" || d.Change != "" || d.After.Serial != 3 || !strings.Contains(d.History, "no incremental history") ||
		!strings.Contains(d.Note, "may be a later change's") {
		t.Fatalf("detail %s: want NOERROR, no change, the zone's serial 3 read after the update, the missing history named and why no serial is cited", rec.Evidence.Detail)
	}
}

// An upsert to the value the record already has: the server answers
// NOERROR and its history shows no step that is this update (nothing
// changed). CONFIRMED on the answer, citing no serial as its change.
func TestUpsertThatChangesNothingCitesNoSerial(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.1"))
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Confirmed || rec.Evidence == nil || len(rec.Evidence.ProviderIDs) != 0 {
		t.Fatalf("state %s, evidence %+v; want CONFIRMED on the answer, no serial", rec.State, rec.Evidence)
	}
	if d := string(rec.Evidence.Detail); !strings.Contains(d, `"history_changes":0`) || !strings.Contains(d, "deleted exactly [10.0.0.1] and added 10.0.0.1") {
		t.Fatalf("detail %s, want an empty history and why no step is this update", d)
	}
	if d := string(rec.Evidence.Detail); !strings.Contains(d, `"serial_note":`) || !strings.Contains(d, "may be a later change's") {
		t.Fatalf("detail %s, want the note saying why no serial is cited, the history read or not", d)
	}
}

// The UPDATE reaches named and its answer is lost: UNKNOWN; the next owner
// reconciles from the authoritative answer (the record holds the value).
func TestUpdateCutAfterSendReconciledFromTheServer(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	w.proxy.CutAfter(updateOnTheWire)
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Unknown || w.proxy.Cuts() != 1 {
		t.Fatalf("state %s (cuts %d), want UNKNOWN", rec.State, w.proxy.Cuts())
	}
	rec = w.env.Reconcile(w.env.TakeOver(), "traffic-db-b")
	if rec.State != ledger.Confirmed || w.cnt.Applies() != 1 {
		t.Fatalf("state %s, applies %d; want CONFIRMED from one UPDATE", rec.State, w.cnt.Applies())
	}
}

// The UPDATE is written but never delivered: the record keeps the approved
// value, the ledger does not confirm it and, with no safe retry, stops for
// review. "Assume applied" would confirm traffic that never moved.
func TestUpdateLostBeforeDeliveryIsNotConfirmed(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	w.proxy.DropAt(updateOnTheWire)
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	rec = w.env.Reconcile(w.env.TakeOver(), "traffic-db-b")
	if rec.State != ledger.ManualReview || w.value(t) != "10.0.0.1" {
		t.Fatalf("state %s, value %s; want MANUAL_REVIEW and the old value", rec.State, w.value(t))
	}
}

// An operator's nsupdate lands between the ledger's revalidation and the
// call: the UPDATE's prerequisite fails at the server (NXRRSET), nothing
// is overwritten, and the record is FAILED with the server's answer.
func TestOperatorEditBetweenRevalidationAndCallIsRefusedNotOverwritten(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	w.cnt.Before = func() {
		if err := w.srv.Nsupdate(w.env.Ctx, "update delete "+name+" A\nupdate add "+name+" 60 A 10.0.0.9"); err != nil {
			t.Error(err)
		}
	}
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Failed || w.value(t) != "10.0.0.9" {
		t.Fatalf("state %s, value %s; want FAILED and the operator's 10.0.0.9", rec.State, w.value(t))
	}
	if !strings.Contains(string(rec.Evidence.Detail), "NXRRSET") || !strings.Contains(string(rec.Evidence.Detail), "10.0.0.9") {
		t.Fatalf("evidence %s, want the server's NXRRSET and the value it holds", rec.Evidence.Detail)
	}
}

// An operator's edit after the approval and before the dispatch: the
// ledger's revalidation sees it; SUPERSEDED, nothing sent.
func TestOperatorEditBeforeDispatchSupersedes(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	if err := w.srv.Nsupdate(w.env.Ctx, "update delete "+name+" A\nupdate add "+name+" 60 A 10.0.0.9"); err != nil {
		t.Fatal(err)
	}
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Superseded || w.cnt.Applies() != 0 || w.value(t) != "10.0.0.9" {
		t.Fatalf("state %s, applies %d, value %s", rec.State, w.cnt.Applies(), w.value(t))
	}
}

// The answer is lost and an operator then edits the record: the value is
// neither the approved nor the wanted one, but the zone's own history
// (IXFR from the approved serial) shows the update applied before the
// edit. CONFIRMED on that evidence, and the operator's value stays.
func TestOperatorEditAfterALostAnswerSettledFromTheZoneHistory(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	w.proxy.CutAfter(updateOnTheWire)
	if rec := w.env.Dispatch(w.env.G, "traffic-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	w.operatorEdit(t, "10.0.0.9")
	rec := w.env.Reconcile(w.env.TakeOver(), "traffic-db-b")
	if rec.State != ledger.Confirmed || !strings.Contains(strings.Join(rec.Evidence.ProviderIDs, " "), "serial 1->2") {
		t.Fatalf("state %s, evidence %+v; want CONFIRMED citing the change 1->2", rec.State, rec.Evidence)
	}
	if w.value(t) != "10.0.0.9" || w.cnt.Applies() != 1 {
		t.Fatalf("value %s, applies %d; the operator's edit must stay", w.value(t), w.cnt.Applies())
	}
}

// The UPDATE never arrives and an operator edits the record: the zone's
// history shows only the operator's change. Not applied, in a changed
// world where a late UPDATE would fail its prerequisite: SUPERSEDED, no
// retry, the operator's value untouched.
func TestLostUpdateThenOperatorEditIsNotApplied(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	w.proxy.DropAt(updateOnTheWire)
	if rec := w.env.Dispatch(w.env.G, "traffic-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	w.operatorEdit(t, "10.0.0.9")
	rec := w.env.Reconcile(w.env.TakeOver(), "traffic-db-b")
	if rec.State != ledger.Superseded || w.value(t) != "10.0.0.9" || w.cnt.Applies() != 1 {
		t.Fatalf("state %s, value %s, applies %d; want SUPERSEDED, the operator's value, one UPDATE", rec.State, w.value(t), w.cnt.Applies())
	}
}

// Where the server keeps no history from the approved serial, a third
// value cannot tell whether the update landed first: Inconclusive, so
// MANUAL_REVIEW — never a guess either way.
func TestThirdValueWithoutHistoryGoesToReview(t *testing.T) {
	w := newWorldWith(t, true)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	w.proxy.CutAfter(updateOnTheWire)
	if rec := w.env.Dispatch(w.env.G, "traffic-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	w.operatorEdit(t, "10.0.0.9")
	rec := w.env.Reconcile(w.env.TakeOver(), "traffic-db-b")
	if rec.State != ledger.ManualReview {
		t.Fatalf("state %s, want MANUAL_REVIEW", rec.State)
	}
	_, js := w.env.Journal("traffic-db-b")
	if last := js[len(js)-1]; !strings.Contains(last.Reason, "no incremental history") {
		t.Fatalf("review reason %q, want the missing history named", last.Reason)
	}
}

// evidenceText is ev's provider ids and detail, readable in a failure.
func evidenceText(ev *ledger.Evidence) string {
	if ev == nil {
		return "none"
	}
	return fmt.Sprintf("ids %q, detail %s", ev.ProviderIDs, ev.Detail)
}

func (w *world) operatorEdit(t *testing.T, value string) {
	t.Helper()
	if err := w.srv.Nsupdate(w.env.Ctx, "update delete "+name+" A\nupdate add "+name+" 60 A "+value); err != nil {
		t.Fatal(err)
	}
}

func TestConfigurationCheckedAtConstruction(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.key", `key "k." { algorithm hmac-sha256; secret "c2VjcmV0LXNlY3JldC1zZWNyZXQ="; };`)
	badAlg := write("alg.key", `key "k." { algorithm hmac-md5; secret "c2VjcmV0LXNlY3JldC1zZWNyZXQ="; };`)
	short := write("short.key", `key "k." { algorithm hmac-sha256; secret "c2hvcnQ="; };`)
	junk := write("junk.key", "not a key file")
	for _, c := range []struct{ name, server, zone, key, want string }{
		{"no port", "127.0.0.1", "example.test.", good, "host:port"},
		{"bad port", "127.0.0.1:notaport", "example.test.", good, "bad port"},
		{"unresolvable", "ns1.invalid:53", "example.test.", good, "does not resolve"},
		{"bad zone", "127.0.0.1:53", "exa mple..test", good, "not a domain name"},
		{"missing key file", "127.0.0.1:53", "example.test.", filepath.Join(dir, "absent"), "no such file"},
		{"no key file", "127.0.0.1:53", "example.test.", "", "no TSIG key file"},
		{"unparsable key", "127.0.0.1:53", "example.test.", junk, "want key"},
		{"unsupported algorithm", "127.0.0.1:53", "example.test.", badAlg, "algorithm"},
		{"short secret", "127.0.0.1:53", "example.test.", short, "at least 16 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := dnsupdate.New(c.server, c.zone, c.key)
			lgtest.Want(t, err, coordinator.InvalidInput)
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "c2Vj") {
				t.Fatalf("error %q, want %q and never the secret", err, c.want)
			}
		})
	}
	if _, err := dnsupdate.New("127.0.0.1:53", "example.test.", good); err != nil {
		t.Fatalf("good configuration: %v", err)
	}
}

func TestExpiredApprovalIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	w.env.ExpiredApproval(w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	if w.value(t) != "10.0.0.1" {
		t.Fatalf("value %s: the record moved", w.value(t))
	}
}

func TestChangedPolicyIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	w.env.ChangedPolicy(w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	if w.value(t) != "10.0.0.1" {
		t.Fatalf("value %s: the record moved", w.value(t))
	}
}

// The UPDATE applies while the task passes to worker-b: worker-b confirms
// from the kept answer, without querying the server or updating again.
func TestAnswerInHandAfterOwnershipChangedConfirms(t *testing.T) {
	w := newWorld(t)
	w.env.AnswerInHand(w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"), nil, ledger.Confirmed, ledger.Confirmed)
	if w.value(t) != "10.0.0.2" {
		t.Fatalf("value %s", w.value(t))
	}
}

// The server refuses the UPDATE (an operator's edit in the gap: NXRRSET)
// while the task passes to worker-b: the refusal is kept and settles the
// record FAILED; the operator's value stays.
func TestRefusalInHandAfterOwnershipChangedIsNotConfirmed(t *testing.T) {
	w := newWorld(t)
	w.env.AnswerInHand(w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"), func() { w.operatorEdit(t, "10.0.0.9") }, ledger.Failed, ledger.Failed)
	if w.value(t) != "10.0.0.9" {
		t.Fatalf("value %s, want the operator's", w.value(t))
	}
}
