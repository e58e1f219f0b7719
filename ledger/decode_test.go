package ledger

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// Stored data the ledger cannot decode has one answer, corrupt_record, to
// reads as to calls that act — never outcome_unknown (a read is never
// unknown) — and nothing is written.
func TestUndecodableStoredDataIsCorruptRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "journal", promote("db-b"))
	k := e.c.Keys()
	lk := store.Of(e.c).Keys()
	if _, err := e.c.Client().Put(e.ctx, lk.Effect(tenant, task, "record"), "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Client().Put(e.ctx, lk.JournalEntry(tenant, task, "journal", 1), "{not json"); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"record":        func() error { _, _, err := e.l.Record(e.ctx, tenant, task, "record"); return err },
		"journal entry": func() error { _, _, err := e.l.Record(e.ctx, tenant, task, "journal"); return err },
		"task journal":  func() error { _, err := e.l.Journal(e.ctx, tenant, task); return err },
		"list":          func() error { _, err := e.l.List(e.ctx, tenant, task, ""); return err },
		"dispatch":      func() error { _, err := e.l.Dispatch(e.ctx, e.g, "record"); return err },
		"reconcile":     func() error { _, err := e.l.Reconcile(e.ctx, e.g); return err },
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), k.Prefix(), coordinator.CorruptRecord, call)
		})
	}
}

// FuzzDecodeRecord: any stored bytes decode to a record or an error, never
// a panic, and what decodes writes back to a form that decodes to itself.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{
		`{"tenant":"t","task":"k","operation":"op","state":"PROPOSED","effect":{"kind":"dns","target":"x","params":{"a":1}},"seq":1}`,
		`{"state":"DISPATCHING","epoch":7,"owner":"w","attempts":1,"dispatched_at":"2026-01-01T00:00:00Z","evidence":{"provider_ids":["c-1"]}}`,
		`{"state":"BOGUS"}`, `null`, `{"seq":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		rec, ok, err := decodeRecord([]*mvccpb.KeyValue{{Key: []byte("/p/effects/t/k/op"), Value: value, ModRevision: 9}})
		if err != nil {
			return
		}
		if !ok || rec.Revision != 9 {
			t.Fatalf("decoded %q: ok %v revision %d", value, ok, rec.Revision)
		}
		first, err := json.Marshal(rec)
		if err != nil {
			return // a value json cannot write back (an invalid RawMessage): the record is refused on write
		}
		back, _, err := decodeRecord([]*mvccpb.KeyValue{{Key: []byte("k"), Value: first, ModRevision: 9}})
		if err != nil {
			t.Fatalf("a written record does not decode: %q: %v", first, err)
		}
		second, _ := json.Marshal(back)
		if !bytes.Equal(first, second) {
			t.Fatalf("record does not survive a round trip:\n%s\n%s", first, second)
		}
	})
}
