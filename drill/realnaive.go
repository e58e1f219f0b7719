package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The naive design on the real providers (naive.go's, in real time): the
// controller lease in etcd that nothing downstream checks, a fresh request
// key per attempt (the promote's application_name), pg_promote sent
// without a precondition, the record changed by nsupdate without a
// prerequisite, the checkpointed plan trusted as present truth.

// commanderApprovesReal is the commander's rule on the naive design's
// plan, on the real topology (realPromotionRule).
func (wk *realWorker) commanderApprovesReal() (bool, string) {
	wk.step()
	return realPromotionRule(wk.w.prov.pg.Topology(wk.w.ctx))
}

// hold stops the naive worker, traffic held.
func (wk *realWorker) hold(reason, format string, args ...any) error {
	wk.w.setHeld(true)
	why := fmt.Sprintf(format, args...)
	wk.record(Event{Kind: KindHold, Effect: reason, Value: wk.w.recordNow(), Detail: why})
	return fmt.Errorf("%w: holds for the commander (%s): %s", errStop, reason, why)
}

func (wk *realWorker) naive() error {
	if err := wk.acquire(); err != nil {
		return err
	}
	w := wk.w
	if wk.completed() {
		wk.note("history: recovery already completed")
		wk.release()
		return nil
	}
	if wk.first {
		wk.step()
		wk.note("plan: promote %s, then point %s at it", realTarget, realRecord)
		if ok, why := wk.commanderApprovesReal(); !ok {
			wk.transition("plan", "promote", "", "REJECTED")
			err := wk.hold(holdCommanderRefused, "the commander refused the plan: %s", why)
			wk.release()
			return err
		}
		wk.note("commander approved the plan")
	} else if w.promotesLogged("") > 0 {
		// The new controller reads the server log as its audit trail: a
		// promote reached the server, so it skips to traffic.
		wk.note("the standby's log shows pg_promote; skipping to traffic")
		target := realTarget
		if ws := w.writers(); len(ws) == 1 {
			target = ws[0]
		}
		done := wk.naiveTraffic(wk.name+"-attempt-0", target, "")
		wk.setCompleted(done)
		wk.finishNaive()
		return nil
	}
	for attempt := 1; attempt <= naiveAttempts && !wk.completed(); attempt++ {
		key := fmt.Sprintf("%s-attempt-%d", wk.name, attempt) // a fresh key per attempt: the incident's bug
		wk.step()
		wk.historyStart(key)
		wk.transition(key, "promote", "", "STARTED")
		wk.stopAt(winPromoteClaim, "after its attempt started, before the call left")
		if wk.first {
			w.remote.call(linkMsg{Op: opStopStandby})
		}
		wk.stopAt(winPromoteResidual, "just before the call")
		evidence, err := wk.naivePromote(key)
		if err != nil {
			wk.historyClose()
			to := "FAILED"
			if errors.Is(err, errResponseLost) {
				to = "UNKNOWN" // the activity timed out; it will be retried as a new attempt
			}
			wk.transition(key, "promote", "STARTED", to)
			known := realOriginal // the checkpoint's writer, unless the topology shows one
			if ws := w.writers(); len(ws) == 1 {
				known = ws[0]
			}
			wk.step()
			wk.naiveChange(key+"-hold", known)
			continue
		}
		if wk.naiveTraffic(key, realTarget, evidence) {
			if wk.woken() {
				wk.note("late activity completion rejected by the workflow history")
				return nil
			}
			wk.historyClose()
			wk.setCompleted(true)
			break
		}
	}
	wk.finishNaive()
	return nil
}

// completed and setCompleted are the workflow history's completion, kept
// by the drill; historyStart and historyClose the worker's open attempt.
func (wk *realWorker) completed() bool {
	if wk.w.remote != nil {
		return wk.w.remote.call(linkMsg{Op: opCompleted}).B
	}
	wk.w.mu.Lock()
	defer wk.w.mu.Unlock()
	return wk.w.history.completed
}

func (wk *realWorker) setCompleted(done bool) {
	if wk.w.remote != nil {
		wk.w.remote.call(linkMsg{Op: opSetCompleted, B: done})
		return
	}
	wk.w.mu.Lock()
	wk.w.history.completed = wk.w.history.completed || done
	wk.w.mu.Unlock()
}

func (wk *realWorker) historyStart(key string) {
	wk.w.remote.call(linkMsg{Op: opHistStart, S: wk.name, S2: key})
}

func (wk *realWorker) historyClose() {
	wk.w.remote.call(linkMsg{Op: opHistClose, S: wk.name})
}

func (wk *realWorker) transition(key, effect, from, to string, evidence ...string) {
	wk.record(Event{Kind: KindTransition, Operation: key, Effect: effect, From: from, To: to, Evidence: evidence})
}

// naivePromote sends pg_promote to the standby with no precondition, its
// connection named for the attempt's key and the worker's epoch. Nil:
// promoted (its evidence id); errResponseLost: the answer did not come
// (the connection cut after send, a timeout); errProviderRefused: the
// server refused or was never reached.
func (wk *realWorker) naivePromote(key string) (string, error) {
	w := wk.w
	w.remote.call(linkMsg{Op: opBeforeCall, S: "promote"})
	defer w.remote.call(linkMsg{Op: opAfterCall, S: "promote", S2: wk.name, N: wk.grant.Epoch, S3: key})
	ctx, cancel := context.WithTimeout(w.ctx, realCallTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d dbname=postgres user=leasegate sslmode=disable", w.prov.proxyPort))
	if err != nil {
		return "", err
	}
	pass, err := os.ReadFile(w.prov.passwordFile)
	if err != nil {
		return "", err
	}
	cfg.Password, cfg.ConnectTimeout = strings.TrimSpace(string(pass)), time.Second
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.RuntimeParams["application_name"] = fmt.Sprintf("naive %s epoch %d", key, wk.grant.Epoch)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("%w: no connection: %v", errProviderRefused, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var promoted bool
	err = conn.QueryRow(ctx, fmt.Sprintf("SELECT pg_promote(true, %d)", int(realPromoteWait/time.Second))).Scan(&promoted)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return "", fmt.Errorf("%w: %s", errProviderRefused, pgErr.Message)
	case err != nil:
		return "", fmt.Errorf("%w: %v", errResponseLost, err)
	case !promoted:
		return "", fmt.Errorf("%w: pg_promote returned false", errResponseLost)
	}
	return realTarget + "@promoted", nil
}

// naiveTraffic points the record at target (the checkpointed plan's: not
// revalidated), reads it back, and records the activity completed.
func (wk *realWorker) naiveTraffic(key, target, promotion string) bool {
	wk.step()
	wk.stopAt(winTrafficClaim, "before its traffic call left")
	id, ok := wk.naiveChange(key, target)
	if !ok {
		return false
	}
	if wk.woken() {
		return true
	}
	if promotion != "" {
		wk.transition(key, "promote", "STARTED", "CONFIRMED", promotion)
	}
	wk.transition(key, "traffic", "", "CONFIRMED", id)
	return true
}

// naiveChange sets the record by nsupdate, without a prerequisite: the
// naive gateway checks who may call, not whether the caller still owns
// the task. It returns the zone's serial after it as the change's id.
func (wk *realWorker) naiveChange(key, target string) (string, bool) {
	w := wk.w
	w.remote.call(linkMsg{Op: opBeforeCall, S: "traffic"})
	wk.record(Event{Kind: KindCall, Actor: "bind", Effect: "ChangeResourceRecordSets", Operation: key, Value: target, By: wk.name,
		Detail: "nsupdate, no prerequisite"})
	err := w.prov.dns.Nsupdate(w.ctx, fmt.Sprintf("update delete %s A\nupdate add %s 60 A %s", realRecord, realRecord, realAddr[target]))
	w.remote.call(linkMsg{Op: opAfterCall, S: "traffic", S2: wk.name, N: wk.grant.Epoch, S3: key})
	if err != nil {
		wk.transition(key, "traffic", "", "UNKNOWN")
		return "", false
	}
	serial, err := w.prov.dns.SOASerial(w.ctx)
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("%s serial %d", w.prov.dns.Zone, serial), true
}

func (wk *realWorker) finishNaive() {
	if wk.completed() {
		wk.note("history: recovery completed")
	} else {
		wk.note("history: recovery not completed after %d attempts", naiveAttempts)
	}
	wk.release()
}
