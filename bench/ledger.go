package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// benchKind is the effect kind of the ledger variant's provider.
const benchKind = "bench"

// benchAdapter is a provider that answers at once and always applies: the
// ledger variant measures the ledger's own Txns, not a provider.
type benchAdapter struct{}

func (benchAdapter) Kind() string              { return benchKind }
func (benchAdapter) Contract() ledger.Contract { return ledger.Contract{Lookup: true, RetrySafe: true} }
func (benchAdapter) Precondition(context.Context, ledger.Effect) (ledger.Observation, error) {
	return ledger.Observation{Digest: "world-1", At: time.Now()}, nil
}
func (benchAdapter) Apply(_ context.Context, call ledger.Call) (ledger.Evidence, error) {
	return ledger.Evidence{ProviderIDs: []string{call.Operation}, At: time.Now()}, nil
}
func (benchAdapter) Observe(_ context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	return ledger.Applied, ledger.Evidence{ProviderIDs: []string{rec.Operation}, At: time.Now()}, nil
}

func newBenchLedger(c *coordinator.Coordinator) (*ledger.Ledger, error) {
	return ledger.New(c, ledger.WithAdapters(benchAdapter{}))
}

// prepare readies what variant v's next operation needs, outside its
// timing: ledger-dispatch's AUTHORIZED record.
func (w *worker) prepare(ctx context.Context, v string) error {
	if v != LedgerDispatch {
		return nil
	}
	w.seq++
	op := fmt.Sprintf("effect-%06d", w.seq)
	if err := w.ledgerAuthorize(ctx, op); err != nil {
		return err
	}
	w.ready = op
	return nil
}

// ledgerAuthorize proposes and authorizes operation op.
func (w *worker) ledgerAuthorize(ctx context.Context, op string) error {
	g := w.ledgerG
	pre := ledger.Observation{Digest: "world-1", At: time.Now()}
	rec, err := w.ledger.Propose(ctx, g, op, ledger.Effect{Kind: benchKind, Target: "target", Policy: "bench-v1"}, pre)
	if err != nil {
		return err
	}
	_, err = w.ledger.Authorize(ctx, g, op, ledger.Approval{Approver: "bench", ParamsDigest: rec.ParamsDigest,
		PreconditionDigest: pre.Digest, At: time.Now()})
	return err
}

// ledgerDispatch dispatches the record prepare authorized: claim,
// revalidate, apply, confirm.
func (w *worker) ledgerDispatch(ctx context.Context) error {
	return w.dispatch(ctx, w.ready)
}

// ledgerLifecycle is one effect through the ledger: propose, authorize,
// dispatch.
func (w *worker) ledgerLifecycle(ctx context.Context) error {
	op := fmt.Sprintf("effect-%06d", w.seq)
	if err := w.ledgerAuthorize(ctx, op); err != nil {
		return err
	}
	return w.dispatch(ctx, op)
}

func (w *worker) dispatch(ctx context.Context, op string) error {
	rec, err := w.ledger.Dispatch(ctx, w.ledgerG, op)
	if err != nil {
		return err
	}
	if rec.State != ledger.Confirmed {
		return fmt.Errorf("dispatch ended %s", rec.State)
	}
	return nil
}
