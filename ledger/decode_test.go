package ledger

import (
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/core"
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
	lk := core.KeysOf(e.c)
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
