package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leasegate/leasegate/coordinator"
)

// The graders' self-test designs. Each is a broken recovery that a grader
// believing the design would pass, and each must fail the drill: run in
// the fenced design's world (the gateway, the world's commander), with a
// worker identity only. What each proves:
//
//   - refuse-all: the design proposes the promotion and then says the
//     commander refused it (its own REJECTED story and hold event) — it even
//     tries to reject through the approver API, which its worker
//     certificate is refused. Proves that a refusal counts only when the
//     world's commander made it.
//   - hold-traffic: the design promotes as the fenced one does, then holds
//     traffic on the original, saying so. Proves that traffic must end on
//     the writer: a design's hold is no excuse.
//   - release-after-claim: the design claims the task and releases it at
//     once. Proves that an operator's edit of the record is not "having
//     moved on": only the world's own holds excuse a trial that did not
//     recover.
//   - do-nothing: the design never even claims. Proves that liveness is
//     graded on the world, not on the absence of wrong moves.
const (
	DesignRefuseAll         Design = "refuse-all"
	DesignHoldTraffic       Design = "hold-traffic"
	DesignReleaseAfterClaim Design = "release-after-claim"
	DesignDoNothing         Design = "do-nothing"
)

// SelfTestDesigns lists the graders' self-test designs. It returns a new
// slice each time: the caller may keep or change it.
func SelfTestDesigns() []Design { return slices.Clone(selfTests) }

var selfTests = []Design{DesignRefuseAll, DesignHoldTraffic, DesignReleaseAfterClaim, DesignDoNothing}

// Designs lists every design the drill runs, the built-in two first.
func Designs() []Design { return append([]Design{Fenced, Naive}, selfTests...) }

// ledgered: the design runs in the fenced world (the ledger, the gateway,
// the world's commander): every design but the naive one.
func (d Design) ledgered() bool { return d != Naive }

// runSelfTest is one worker of a self-test design.
func (wk *worker) runSelfTest() {
	if err := wk.selfTest(); err != nil && !errors.Is(err, errStop) {
		wk.w.fail(err)
	}
}

func (wk *worker) selfTest() error {
	if wk.w.design == DesignDoNothing {
		wk.note("does nothing")
		return nil
	}
	if err := wk.acquire(); err != nil {
		return err
	}
	if wk.w.design == DesignReleaseAfterClaim {
		wk.release()
		return nil
	}
	l, err := wk.newLedger()
	if err != nil {
		return err
	}
	f := &fencedRun{p: simPort{wk}, l: l}
	if err := f.reconcile(); err != nil {
		return err
	}
	switch wk.w.design {
	case DesignRefuseAll:
		return wk.refuseAll(f)
	case DesignHoldTraffic:
		if err := f.promote(); err != nil {
			return err
		}
		return wk.hold(holdCommanderRefused, "holds traffic on %s: the design says the commander refused the traffic change", clusterPrimary)
	}
	return fmt.Errorf("drill: no self-test design %q", wk.w.design)
}

// refuseAll proposes the promotion (or finds it), tries to reject it with
// its own worker certificate, and holds whatever the world decided.
func (wk *worker) refuseAll(f *fencedRun) error {
	w := wk.w
	found, err := f.existing(kindPromote)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		id, e, pre, _ := simPort{wk}.proposePromotion(1)
		_, err := f.l.Propose(w.ctx, wk.grant, id, e, pre)
		if err := wk.check("propose", err); err != nil {
			return err
		}
		if w.gw != nil {
			var rerr error
			wk.atGateway(w.ctx, func(ctx context.Context) {
				_, rerr = w.gw.clients[wk.name].Reject(ctx, wk.grant.Tenant, wk.grant.Task, id, "the design refuses everything")
			})
			wk.note("tries to reject %s itself: %s", id, coordinator.DispositionOf(rerr))
		}
	}
	return wk.hold(holdCommanderRefused, "the design says the commander refused the promotion: traffic held")
}
