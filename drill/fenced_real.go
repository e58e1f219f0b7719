package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// The fenced design's port in the real-provider world (fenced.go runs on
// it): a worker process whose whole configuration is the gateway's
// address, the CA and its own certificate — no etcd client, no provider
// credential. It claims through the gateway's sessions, reads the servers
// only through the gateway (ObservePrecondition: the gateway's adapters,
// with the gateway's credentials), and proposes, waits for the world's
// commander (realcommander.go, in the drill's process), dispatches and
// reconciles through `leasegate serve --config` (realserve.go).

// realPace is the fenced design's pace in real time.
var realPace = fencedPace{
	reconcileWait: 500 * time.Millisecond,
	decisionFirst: 100 * time.Millisecond, decisionMost: 500 * time.Millisecond, doubleAfter: 5 * time.Second, decisionPolls: 200,
	reviewPoll: 500 * time.Millisecond, reviewPolls: realReviewLooks + 10,
	settlePoll: 250 * time.Millisecond, settleTries: 40,
	dispatchHolds: 40, dispatchWait: 500 * time.Millisecond,
}

// realPort is one fenced worker process as the design's port.
type realPort struct {
	wk   *realWorker
	c    *client.Client
	sess *client.Session
	// record is the traffic record's value as last read (for a hold's
	// event).
	record string
	// seenTopo is the last topology read that showed a single writer, and
	// seenWriter that writer ("" after a read that showed none): the world
	// a traffic change is proposed from and requires.
	seenTopo   ledger.Observation
	seenWriter string
}

var _ fencedPort = (*realPort)(nil)

// runFencedReal runs the fenced design in a worker process, given the
// gateway's client.
func (wk *realWorker) runFencedReal(c *client.Client) error {
	return runFencedOn(&realPort{wk: wk, c: c})
}

func (p *realPort) ctx() context.Context        { return p.wk.w.ctx }
func (p *realPort) grantNow() coordinator.Grant { return p.wk.grant }
func (p *realPort) tenantTask() (tenant, task string) {
	return p.wk.w.run.tenant(p.wk.w.design), p.wk.w.task
}
func (p *realPort) check(op string, err error) error { return p.wk.check(op, err) }
func (p *realPort) note(format string, args ...any)  { p.wk.note(format, args...) }
func (p *realPort) wait(d time.Duration)             { p.wk.sleep(d) }
func (p *realPort) act()                             { p.wk.step() }
func (p *realPort) clock() time.Duration             { return p.wk.w.since() }
func (p *realPort) pace() fencedPace                 { return realPace }
func (p *realPort) original() string                 { return realOriginal }
func (p *realPort) trafficRecord() string            { return realRecord }
func (p *realPort) seen(ledger.Record)               {}
func (p *realPort) closed()                          {}
func (p *realPort) open() (gateway, error)           { return realGateway{p}, nil }

// hold stops the worker, traffic held (the design's word only).
func (p *realPort) hold(reason, format string, args ...any) error {
	p.wk.w.setHeld(true)
	why := fmt.Sprintf(format, args...)
	p.wk.record(Event{Kind: KindHold, Effect: reason, Value: p.record, Detail: why})
	return fmt.Errorf("%w: holds for the commander (%s): %s", errStop, reason, why)
}

// acquire claims the task through the gateway: a session of realSessionTTL
// per attempt, renewed by the client every TTL/3 (none while the process
// is stopped: its lease expires in etcd), tried again every
// realClaimRetry while another worker holds the task.
func (p *realPort) acquire() error {
	wk, w := p.wk, p.wk.w
	tenant, task := p.tenantTask()
	for {
		if w.isHeld() || w.ctx.Err() != nil {
			return fmt.Errorf("%w: nothing to claim the task for", errStop)
		}
		if p.sess == nil {
			s, err := p.c.OpenSession(w.ctx, realSessionTTL, client.WithKeepAlive())
			if err != nil {
				return fmt.Errorf("session of %s at the gateway: %w", wk.name, err)
			}
			p.sess = s
		}
		g, err := p.sess.Claim(w.ctx, tenant, task)
		switch coordinator.DispositionOf(err) {
		case coordinator.OK:
			wk.grant = g
			w.remote.call(linkMsg{Op: opClaimed, N: g.Epoch, N2: g.Lease})
			wk.record(Event{Kind: KindClaim, Detail: "granted " + wk.name})
			if w.isHeld() { // the holder ended in its hold as this claim went in
				p.release()
				return fmt.Errorf("%w: the task is held for the commander", errStop)
			}
			return nil
		case coordinator.Busy:
			wk.sleep(realClaimRetry)
		case coordinator.ExpiredOwner: // the session's lease is gone: a new one
			p.endSession()
		default:
			p.endSession()
			return fmt.Errorf("claim by %s: %w", wk.name, err)
		}
	}
}

// release gives the task up when the worker is done, and ends its session.
func (p *realPort) release() {
	if err := p.c.Release(p.ctx(), p.wk.grant); err != nil {
		p.note("release refused: %s", coordinator.DispositionOf(err))
	} else {
		p.wk.record(Event{Kind: KindLost, Detail: "released"})
	}
	p.endSession()
}

func (p *realPort) endSession() {
	if p.sess == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx()), 5*time.Second)
	_ = p.sess.Close(ctx)
	cancel()
	p.sess = nil
}

// promotion is the incident's promotion as the pgpromote adapter takes it.
func realPromotion() ledger.Effect {
	b, _ := json.Marshal(map[string]string{"target": realTarget, "max_loss": maxLoss.String()})
	return ledger.Effect{Kind: pgpromote.Kind, Target: realTarget, Params: b, Policy: policyPromote}
}

// realTraffic is the record's move to place as the dnsupdate adapter
// takes it.
func realTraffic(place string) ledger.Effect {
	b, _ := json.Marshal(dnsupdate.Params{Type: "A", Value: realAddr[place], TTL: 60})
	return ledger.Effect{Kind: dnsupdate.Kind, Target: mdns.CanonicalName(realRecord), Params: b, Policy: policyTraffic}
}

// observe reads the world e depends on through the gateway: the worker's
// only view of the servers.
func (p *realPort) observe(e ledger.Effect) (ledger.Observation, error) {
	return p.c.ObservePrecondition(p.ctx(), p.wk.grant, e)
}

// topology is the servers' topology through the gateway: the writer when
// exactly one node answers as writer ("" and a note otherwise). A
// provider that cannot show it is a hold, read as no single writer; a
// refusal (the fence) is the caller's.
func (p *realPort) topology() (writer, unsettled string, err error) {
	o, err := p.observe(realPromotion())
	if err != nil {
		if coordinator.DispositionOf(err).Class() == coordinator.ClassUnavailable {
			return "", "unreadable", nil
		}
		return "", "", err
	}
	var t pgpromote.Topology
	if err := json.Unmarshal(o.Detail, &t); err != nil {
		return "", "", fmt.Errorf("the gateway's topology: %w", err)
	}
	p.seenTopo, p.seenWriter = o, oneWriter(t.Writers())
	if p.seenWriter != "" {
		return p.seenWriter, "", nil
	}
	return "", fmt.Sprint(t.Writers()), nil
}

func (p *realPort) view() (string, string, error) { return p.topology() }

func (p *realPort) writerNow() (string, error) {
	writer, _, err := p.topology()
	return writer, err
}

func (p *realPort) recordNow() (string, error) {
	o, err := p.observe(realTraffic(realOriginal))
	if err != nil {
		if coordinator.DispositionOf(err).Class() == coordinator.ClassUnavailable {
			return "(unreadable)", nil
		}
		return "", err
	}
	var rr dnsupdate.RRset
	if err := json.Unmarshal(o.Detail, &rr); err != nil {
		return "", fmt.Errorf("the gateway's record: %w", err)
	}
	p.record = realName(rr.Values)
	return p.record, nil
}

func (p *realPort) verifyView() (string, string, string, error) {
	record, err := p.recordNow()
	if err != nil {
		return "", "", "", err
	}
	writer, unsettled, err := p.topology()
	return record, writer, unsettled, err
}

func (p *realPort) proposePromotion(n int) (string, ledger.Effect, ledger.Observation, error) {
	id := "promote/" + p.wk.w.task
	if n > 1 {
		id += fmt.Sprintf("/%d", n)
	}
	e := realPromotion()
	pre, err := p.observe(e)
	return id, e, pre, err
}

// proposeTraffic is the n-th traffic intent toward writer, against the
// record as the gateway's DNS adapter shows it now, requiring the
// topology — pgpromote's observation of the promotion's world — to be the
// one the worker chose writer from (its last view, showing writer as the
// single writer). pgpromote's digest is each node's role, timeline and
// system identifier, not its LSN or start time, so the requirement holds
// while the servers only replicate, and changes when a node changes role
// or timeline, stops or comes back. The design views the topology just
// before it proposes (settledView): a last view that did not show writer
// is the drill's own error.
func (p *realPort) proposeTraffic(n int, writer string) (string, ledger.Effect, ledger.Observation, []ledger.Requirement, error) {
	if _, ok := realAddr[writer]; !ok {
		return "", ledger.Effect{}, ledger.Observation{}, nil, fmt.Errorf("no address for the writer %q", writer)
	}
	if p.seenWriter != writer {
		return "", ledger.Effect{}, ledger.Observation{}, nil, fmt.Errorf("no topology read shows the writer %q (the last showed %q)", writer, p.seenWriter)
	}
	e := realTraffic(writer)
	pre, err := p.observe(e)
	requires := []ledger.Requirement{{Effect: realPromotion(), Precondition: p.seenTopo}}
	return fmt.Sprintf("traffic/%s/%d", p.wk.w.task, n), e, pre, requires, err
}

func (p *realPort) trafficValue(rec ledger.Record) string { return realTrafficValue(rec) }

// realTrafficValue is the place a traffic record points the record at.
func realTrafficValue(rec ledger.Record) string {
	var tp dnsupdate.Params
	if json.Unmarshal(rec.Effect.Params, &tp) != nil || tp.Value == "" {
		return ""
	}
	return realName([]string{tp.Value})
}

// beforeDispatch: a dispatch takes a step; the first worker's first
// promotion dispatch is where the standby-stopped fault strikes (the drill
// stops the standby).
func (p *realPort) beforeDispatch(rec ledger.Record) {
	p.wk.step()
	if rec.Effect.Kind == pgpromote.Kind && p.wk.first {
		p.wk.w.remote.call(linkMsg{Op: opStopStandby})
	}
}

// realGateway is the worker's gateway: `leasegate serve`, under its own
// certificate. A dispatch is where the plan's pause may strike the first
// worker: the call goes out, and the worker asks the drill to stop it; the
// drill waits until the world shows the dispatch where the window says
// (claimed, or answered by the provider), SIGSTOPs the process — its
// session's renewals stop, its lease expires in etcd, the other worker
// claims — and sends SIGCONT: the worker goes on from the answer.
type realGateway struct{ p *realPort }

var _ gateway = realGateway{}

func (g realGateway) Propose(ctx context.Context, gr coordinator.Grant, operation string, e ledger.Effect, pre ledger.Observation) (ledger.Record, error) {
	return g.p.c.Propose(ctx, gr, operation, e, pre)
}

func (g realGateway) ProposeRequiring(ctx context.Context, gr coordinator.Grant, operation string, e ledger.Effect, pre ledger.Observation, requires []ledger.Requirement) (ledger.Record, error) {
	return g.p.c.ProposeRequiring(ctx, gr, operation, e, pre, requires)
}

func (g realGateway) Reconcile(ctx context.Context, gr coordinator.Grant) ([]ledger.Record, error) {
	return g.p.c.Reconcile(ctx, gr)
}

func (g realGateway) List(ctx context.Context, tenant, task string, state ledger.State) ([]ledger.Record, error) {
	return g.p.c.List(ctx, tenant, task, state)
}

func (g realGateway) Record(ctx context.Context, tenant, task, operation string) (ledger.Record, []ledger.Transition, error) {
	return g.p.c.Record(ctx, tenant, task, operation)
}

func (g realGateway) Dispatch(ctx context.Context, gr coordinator.Grant, operation string) (ledger.Record, error) {
	wk := g.p.wk
	win, what := g.window(operation)
	if win == "" {
		return g.p.c.Dispatch(ctx, gr, operation)
	}
	wk.paused = true
	type answer struct {
		rec ledger.Record
		err error
	}
	ans := make(chan answer, 1)
	go func() {
		r, err := g.p.c.Dispatch(ctx, gr, operation)
		ans <- answer{r, err}
	}()
	wk.w.remote.call(linkMsg{Op: opPause, S: string(win), S2: what, S3: operation})
	wk.note("wakes up and continues where it was (%s)", win)
	a := <-ans
	return a.rec, a.err
}

// window is the plan's pause window at a dispatch of operation ("" when
// none strikes here).
func (g realGateway) window(operation string) (window, string) {
	wk := g.p.wk
	if !wk.first || wk.paused {
		return "", ""
	}
	promote := realEffect(operation) == "promote"
	switch win := wk.w.plan.pauseIn; {
	case promote && win == winPromoteClaim:
		return win, "while its promotion's dispatch is at the gateway (claimed, not yet answered)"
	case promote && win == winPromoteResidual:
		return win, "as the provider's answer to its promotion comes back, before the worker acts on it"
	case !promote && win == winTrafficClaim:
		return win, "while its traffic change's dispatch is at the gateway"
	}
	return "", ""
}

// check copies the journal (the drill does) and says whether the worker
// may go on: a fence refusal is recorded and stops it (errStop); any
// other error is the drill's own.
func (wk *realWorker) check(op string, err error) error {
	wk.w.syncJournal()
	if err == nil {
		return nil
	}
	switch d := coordinator.DispositionOf(err); d {
	case coordinator.StaleOwner, coordinator.ExpiredOwner, coordinator.GenerationMismatch:
		wk.record(Event{Kind: KindRefused, Effect: op, Detail: string(d) + ": refused at the gateway; the worker stops"})
		return fmt.Errorf("%w: %s refused: %w", errStop, op, err)
	}
	return fmt.Errorf("%s by %s: %w", op, wk.name, err)
}

// realPauseReached says whether the world shows the dispatch of rec where
// window win strikes: claimed (DISPATCHING or later) for a claim window,
// answered (past DISPATCHING) for the residual one.
func realPauseReached(win window, rec ledger.Record) bool {
	switch rec.State {
	case ledger.Proposed, ledger.Authorized, "":
		return false
	case ledger.Dispatching:
		return win != winPromoteResidual
	}
	return true
}

// errNoGateway: the real-provider fenced worker was given no gateway.
var errNoGateway = errors.New("no gateway in the worker's spec")

// realWorkerClient is the fenced worker's client of the gateway, from its
// spec: the address, the CA, its certificate and key — nothing else.
func realWorkerClient(sp workerSpec) (*client.Client, error) {
	if sp.Gateway == "" {
		return nil, errNoGateway
	}
	tc, err := client.TLSConfig(sp.CA, sp.Cert, sp.Key)
	if err != nil {
		return nil, err
	}
	return client.New(sp.Gateway, tc)
}

// realPromotionRule is the commander's rule for the promotion on the real
// topology: the target answers as a standby and no node answers as a
// writer.
func realPromotionRule(t pgpromote.Topology) (bool, string) {
	n, _ := t.Node(realTarget)
	switch {
	case !n.Reachable:
		return false, realTarget + " does not answer: not approved"
	case !n.InRecovery:
		return false, realTarget + " is a writer already: nothing to approve"
	case len(t.Writers()) > 0:
		return false, fmt.Sprintf("%v answers as writer: not approved (fence it first)", t.Writers())
	}
	return true, fmt.Sprintf("approves promotion of %s: a standby on timeline %d, no writer answers", realTarget, n.Timeline)
}

// oneWriter is the topology's single writer ("" if not exactly one).
func oneWriter(ws []string) string {
	if len(ws) == 1 {
		return ws[0]
	}
	return ""
}
