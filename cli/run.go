package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a command while holding a task; stop it when ownership is lost",
		ArgsUsage: "-- COMMAND [ARGS...]",
		Description: example(`Claims the task (with --wait, waits until it is free), keeps the lease alive,
and runs COMMAND with the grant in its environment: LEASEGATE_TENANT, _TASK,
_OWNER, _EPOCH, _LEASE, _REALM, _GRANT (the grant's JSON), and _ENDPOINTS and
_PREFIX so that a 'leasegate commit --grant -' inside reaches the same etcd.
The credentials are not passed on: LEASEGATE_USER and LEASEGATE_PASSWORD are
removed from COMMAND's environment, and the TLS and auth flags are not given
to it; a COMMAND that talks to etcd brings its own.
COMMAND runs in its own process group. If ownership is lost — the lease expires
or is revoked, the owner key is deleted or replaced, or the realm rotates —
the group gets SIGTERM, then SIGKILL after --kill-after, and leasegate exits 5.
On SIGINT or SIGTERM the group gets the same treatment. When COMMAND exits, the
grant is released and leasegate exits with COMMAND's status (128+n if signal n
ended it). With --wait, --wait-timeout bounds the wait: past it, run gives up
with busy (exit 1) and never starts COMMAND.
With --gateway, the session is the gateway's: this process alone renews its
lease (every TTL/3; the gateway never renews on its own, so a paused run
loses the task at its TTL), ownership is watched on the gateway's stream,
the owner is the certificate's identity (no --owner), and COMMAND gets
LEASEGATE_GATEWAY (the URL) instead of _ENDPOINTS and _PREFIX — not the
certificate's key nor the session token: a COMMAND that calls the gateway
brings its own certificate. --metrics-addr is refused (no etcd requests).`,
			"leasegate run --tenant acme --task invoices --owner worker-1 --ttl 10s -- ./billing-worker --once",
			"leasegate --gateway https://gw:7443 --cacert ca.pem --cert w.pem --key w-key.pem run --tenant acme --task invoices --wait -- ./billing-worker",
			"leasegate run --tenant acme --task invoices --owner worker-2 --wait --wait-timeout 5m -- ./billing-worker",
			"leasegate run --tenant acme --task invoices --owner worker-1 --metrics-addr 127.0.0.1:9464 -- ./billing-worker",
			`leasegate run --tenant acme --task invoices --owner w2 --wait -- sh -c 'echo "$LEASEGATE_GRANT" | leasegate commit --grant - --operation op-1 --value paid --expected-version 0'`),
		Flags: []cli.Flag{
			tenantFlag("tenant of the task"), taskFlag("task to hold"), ownerFlag(), ttlFlag(10 * time.Second),
			&cli.BoolFlag{Name: "wait", Usage: "wait until the task is free instead of refusing with busy"},
			&cli.DurationFlag{Name: "wait-timeout", Usage: "with --wait: give up (busy, exit 1) if the task is not free within this long; 0 waits until interrupted"},
			&cli.DurationFlag{Name: "kill-after", Usage: "how long after SIGTERM the child's group gets SIGKILL", Value: 10 * time.Second},
			metricsAddrFlag(),
		},
		Action: run,
	}
}

// childStatus is how `run`'s child ended.
type childStatus struct {
	ExitCode int    `json:"exit_code"`              // its status; 128+n if signal n ended it
	Signal   string `json:"signal,omitempty"`       // the signal that ended it, if one did
	Stopped  string `json:"stopped_with,omitempty"` // SIGTERM or SIGKILL if leasegate stopped it
}

func (s childStatus) String() string {
	var b strings.Builder
	if s.Stopped != "" {
		fmt.Fprintf(&b, "stopped with %s, ", s.Stopped)
	}
	if s.Signal != "" {
		fmt.Fprintf(&b, "ended by signal %s (status %d)", s.Signal, s.ExitCode)
	} else {
		fmt.Fprintf(&b, "exited with status %d", s.ExitCode)
	}
	return b.String()
}

// runOutput is run's result with -o json when ownership held to the end.
type runOutput struct {
	Disposition coordinator.Disposition `json:"disposition"` // released, or why the release failed
	Grant       coordinator.Grant       `json:"grant"`
	Child       childStatus             `json:"child"`
}

// runSpec is run's checked flags and command.
type runSpec struct {
	tenant, task, owner string
	ttl                 time.Duration
	wait                bool
	waitTimeout         time.Duration // 0: --wait waits until interrupted
	killAfter           time.Duration
	path                string   // the command, looked up in PATH
	args                []string // its arguments, args[0] as given
}

func run(c *cli.Context) error {
	spec, err := runSpecOf(c)
	if err != nil {
		return err
	}
	if viaGateway(c) {
		return runViaGateway(c, spec)
	}
	g := globalsOf(c)
	lg := g.lg.Named("run").With(zap.String("tenant", spec.tenant), zap.String("task", spec.task), zap.String("owner", spec.owner))

	metrics, stopMetrics, err := serveMetrics(c)
	if err != nil {
		return err
	}
	defer stopMetrics()
	ctx, cancel := commandContext(c)
	defer cancel()
	co, done, err := connect(ctx, c, acts, metricsOptions(metrics)...)
	if err != nil {
		return err
	}
	defer done()
	s, err := co.NewSession(ctx, spec.owner, spec.ttl)
	if err != nil {
		return err
	}
	// Closing revokes the lease: whatever happens below, no owner key of
	// this run outlives it.
	defer func() {
		cctx, ccancel := cleanupContext(c)
		defer ccancel()
		if err := s.Close(cctx); err != nil {
			lg.Warn("revoking the session's lease failed; it expires after its TTL", zap.Error(err))
		}
	}()
	grant, err := claimToRun(c, ctx, s, spec)
	if err != nil {
		return err
	}
	lg = lg.With(zap.Int64("epoch", grant.Epoch), zap.String("lease-id", coordinator.FormatLeaseID(grant.Lease)))

	monitor := func(ctx context.Context) *coordinator.Error { return monitorOwnership(ctx, co, s, grant, lg) }
	status, lost, err := superviseChild(c, monitor, childEnv(g, grant), spec, lg)
	if err != nil {
		return err
	}
	if lost != nil {
		return &ownershipLost{cause: lost, grant: grant, child: status}
	}
	return released(c, co.Release, runOutput{Disposition: coordinator.Released, Grant: grant, Child: status})
}

// runSpecOf checks run's flags and command, before any I/O.
func runSpecOf(c *cli.Context) (runSpec, error) {
	op := commandName(c)
	names := []string{"tenant", "task", "owner"}
	if viaGateway(c) {
		// The owner is the certificate's identity; --metrics-addr measures
		// etcd requests, of which there are none through the gateway.
		switch {
		case c.IsSet("owner"):
			return runSpec{}, store.NewError(store.InvalidInput, op, "", "", "--owner cannot be given with --gateway: the owner is the identity of your certificate", nil)
		case c.IsSet("metrics-addr"):
			return runSpec{}, store.NewError(store.InvalidInput, op, "", "", "--metrics-addr measures etcd requests, and through --gateway there are none; the gateway serves its own metrics", nil)
		}
		names = names[:2]
	}
	l, err := labels(c, names...)
	if err != nil {
		return runSpec{}, err
	}
	spec := runSpec{tenant: l[0], task: l[1], wait: c.Bool("wait"),
		waitTimeout: c.Duration("wait-timeout"), killAfter: c.Duration("kill-after")}
	if len(l) > 2 {
		spec.owner = l[2]
	}
	if spec.ttl, err = ttlOf(c); err != nil {
		return runSpec{}, err
	}
	switch {
	case spec.killAfter < 0:
		return runSpec{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--kill-after %v is negative", spec.killAfter), nil)
	case spec.waitTimeout < 0:
		return runSpec{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--wait-timeout %v is negative", spec.waitTimeout), nil)
	case c.IsSet("wait-timeout") && !spec.wait:
		return runSpec{}, store.NewError(store.InvalidInput, op, "", "", "--wait-timeout bounds --wait: give both, or neither", nil)
	}
	spec.args = c.Args().Slice()
	if len(spec.args) == 0 {
		return runSpec{}, store.NewError(store.InvalidInput, op, "", "", "no command to run; see 'leasegate run --help'", nil)
	}
	if spec.path, err = exec.LookPath(spec.args[0]); err != nil {
		return runSpec{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("command %q: %v", spec.args[0], err), nil)
	}
	return spec, nil
}

// claimToRun claims the task on s: at once, or with --wait when it is
// free (within --wait-timeout, if given).
func claimToRun(c *cli.Context, ctx context.Context, s *coordinator.Session, spec runSpec) (coordinator.Grant, error) {
	if !spec.wait {
		return s.Claim(ctx, spec.tenant, spec.task)
	}
	wctx, wcancel := waitContext(c, spec)
	defer wcancel()
	return s.Acquire(wctx, spec.tenant, spec.task)
}

// waitContext bounds --wait by --wait-timeout, if given.
func waitContext(c *cli.Context, spec runSpec) (context.Context, context.CancelFunc) {
	if spec.waitTimeout > 0 {
		return context.WithTimeoutCause(c.Context, spec.waitTimeout, fmt.Errorf("gave up waiting: --wait-timeout %v passed", spec.waitTimeout))
	}
	return c.Context, func() {}
}

// superviseChild starts the command with env (the grant) added to its
// environment and waits until it exits, monitor reports ownership lost
// (lost, and the child is stopped) or run is interrupted (the child is
// stopped). It returns how the child ended. monitor returns why the grant
// stopped being current, or nil once its context is done.
func superviseChild(c *cli.Context, monitor func(context.Context) *coordinator.Error, env []string,
	spec runSpec, lg *zap.Logger) (childStatus, *coordinator.Error, error) {
	cmd := exec.Command(spec.path, spec.args[1:]...)
	cmd.Args[0] = spec.args[0]
	cmd.Env = append(withoutCredentials(os.Environ()), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.App.Reader, c.App.Writer, c.App.ErrWriter
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second // bounds waiting on output pipes a grandchild holds
	if err := cmd.Start(); err != nil {
		return childStatus{}, nil, store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("cannot start %q: %v", spec.args[0], err), nil)
	}
	lg.Info("child started", zap.Int("pid", cmd.Process.Pid))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	mctx, stopMonitor := context.WithCancel(context.Background())
	lostc := make(chan *coordinator.Error, 1)
	go func() { lostc <- monitor(mctx) }()

	var lost *coordinator.Error
	var stopped string
	select {
	case <-exited:
	case lost = <-lostc:
		lg.Warn("ownership lost; stopping the child", zap.String("disposition", string(lost.Disposition)), zap.String("detail", lost.Detail))
		stopped = stopChild(cmd, exited, spec.killAfter, lg)
	case <-c.Context.Done():
		lg.Info("interrupted; stopping the child")
		stopped = stopChild(cmd, exited, spec.killAfter, lg)
	}
	stopMonitor()
	if lost == nil {
		// The child ended first: a loss seen now is the release's to report.
		<-lostc
	}
	status := statusOf(cmd.ProcessState, stopped)
	lg.Info("child ended", zap.Stringer("status", status))
	return status, lost, nil
}

// released releases the grant of a child that ended with ownership held,
// and returns run's answer: the child's status. A failed release is
// reported by the app's report (releaseFailed), not here.
func released(c *cli.Context, release func(context.Context, coordinator.Grant) error, out runOutput) error {
	rctx, rcancel := cleanupContext(c)
	defer rcancel()
	if err := release(rctx, out.Grant); err != nil {
		out.Disposition = coordinator.DispositionOf(err)
		return &releaseFailed{cause: err, out: out}
	}
	if g := globalsOf(c); g.out.json {
		if err := g.out.result(out, table{}); err != nil {
			return err
		}
	}
	if out.Child.ExitCode != 0 {
		return childExit{out.Child.ExitCode}
	}
	return nil
}

// withoutCredentials is env without the variables leasegate reads
// credentials from (credentialEnv): the child is given a grant, not the
// etcd user's password.
func withoutCredentials(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(credentialEnv, name) {
			out = append(out, kv)
		}
	}
	return out
}

// childEnv is the grant, as the child sees it, and where to reach the same
// etcd.
func childEnv(g *globals, grant coordinator.Grant) []string {
	return append(grantEnv(grant), "LEASEGATE_ENDPOINTS="+strings.Join(g.endpoints, ","), "LEASEGATE_PREFIX="+g.prefix)
}

// grantEnv is the grant in the child's environment.
func grantEnv(grant coordinator.Grant) []string {
	raw, _ := json.Marshal(grant)
	return []string{
		"LEASEGATE_TENANT=" + grant.Tenant,
		"LEASEGATE_TASK=" + grant.Task,
		"LEASEGATE_OWNER=" + grant.Owner,
		"LEASEGATE_EPOCH=" + strconv.FormatInt(grant.Epoch, 10),
		"LEASEGATE_LEASE=" + coordinator.FormatLeaseID(grant.Lease),
		"LEASEGATE_REALM=" + grant.Realm,
		"LEASEGATE_GRANT=" + string(raw),
	}
}

// stopChild sends SIGTERM to the child's process group, SIGKILL after
// killAfter if the child has not exited, and waits for it. It returns the
// last signal sent.
func stopChild(cmd *exec.Cmd, exited <-chan error, killAfter time.Duration, lg *zap.Logger) string {
	pgid := cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
		lg.Debug("SIGTERM", zap.Error(err))
	}
	timer := time.NewTimer(killAfter)
	defer timer.Stop()
	select {
	case <-exited:
		return "SIGTERM"
	case <-timer.C:
	}
	lg.Warn("child still running after --kill-after; sending SIGKILL", zap.Duration("kill-after", killAfter))
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		lg.Debug("SIGKILL", zap.Error(err))
	}
	<-exited
	return "SIGKILL"
}

func statusOf(ps *os.ProcessState, stopped string) childStatus {
	st := childStatus{ExitCode: ps.ExitCode(), Stopped: stopped}
	if ws, isUnix := ps.Sys().(syscall.WaitStatus); isUnix && ws.Signaled() {
		st.Signal = ws.Signal().String()
		st.ExitCode = 128 + int(ws.Signal())
	}
	return st
}

// watchRetry paces re-creating a watch that etcd cut (no leader, etcd
// down): the session's local deadline, not this loop, is what ends
// ownership while etcd cannot be reached.
const watchRetry = 500 * time.Millisecond

// monitorOwnership returns why grant stopped being current, as soon as etcd
// shows it — the session ends (lease lost or local deadline passed), the
// owner key is deleted or rewritten, or the realm changes — or nil once ctx
// is done. It watches from the revision after the claim, so nothing between
// the claim and the watch is missed; it never polls.
func monitorOwnership(ctx context.Context, co *coordinator.Coordinator, s *coordinator.Session, g coordinator.Grant, lg *zap.Logger) *coordinator.Error {
	k := co.Keys()
	from := g.Epoch + 1
	for {
		lost, next, err := watchOnce(ctx, co, s, g, from)
		if lost != nil || ctx.Err() != nil {
			return lost
		}
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			// The history from `from` to `next`, the compaction revision,
			// is gone: ask etcd whether the grant is still current. If it
			// is, no loss happened before the answer, which came after
			// `next`: watch on from there. A hold keeps `from`, and the
			// next watch asks again.
			cerr := co.Current(ctx, g)
			var e *coordinator.Error
			if errors.As(cerr, &e) && e.Disposition.Class() == coordinator.ClassRefused {
				e.Op = "run"
				return e
			}
			if cerr == nil {
				from = next
			}
		default:
			from = next
		}
		lg.Info("ownership watch cut; watching again", zap.Error(err), zap.String("owner-key", k.Owner(g.Tenant, g.Task)))
		select {
		case <-ctx.Done():
			return nil
		case <-s.Done():
			return sessionLost(g, s)
		case <-time.After(watchRetry):
		}
	}
}

// watchOnce watches the owner key and the realm from revision `from` until
// ownership is lost (lost != nil), ctx ends, or etcd cuts the watch (err,
// and the revision to resume from: after ErrCompacted, the compaction
// revision, to resume from only once the grant is known current).
func watchOnce(ctx context.Context, co *coordinator.Coordinator, s *coordinator.Session, g coordinator.Grant, from int64) (lost *coordinator.Error, next int64, err error) {
	k := co.Keys()
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	owner := co.Client().Watch(wctx, k.Owner(g.Tenant, g.Task), clientv3.WithRev(from))
	realm := co.Client().Watch(wctx, k.Realm(), clientv3.WithRev(from))
	refuse := func(d coordinator.Disposition, format string, args ...any) *coordinator.Error {
		return store.NewError(d, "run", g.Tenant, g.Task, fmt.Sprintf(format, args...), nil)
	}
	next = from
	for {
		var resp clientv3.WatchResponse
		var open bool
		select {
		case <-ctx.Done():
			return nil, next, ctx.Err()
		case <-s.Done():
			return sessionLost(g, s), next, nil
		case resp, open = <-owner:
			if !open || resp.Err() != nil {
				return nil, max(next, resp.CompactRevision), cutError(resp, open)
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					return refuse(coordinator.ExpiredOwner, "the owner key of epoch %d was deleted at revision %d (lease expired or revoked, or the grant released)",
						g.Epoch, ev.Kv.ModRevision), next, nil
				}
				return refuse(coordinator.StaleOwner, "the owner key was rewritten at revision %d to %q", ev.Kv.ModRevision, ev.Kv.Value), next, nil
			}
		case resp, open = <-realm:
			if !open || resp.Err() != nil {
				return nil, max(next, resp.CompactRevision), cutError(resp, open)
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE || string(ev.Kv.Value) != g.Realm {
					return refuse(coordinator.GenerationMismatch, "the realm changed at revision %d", ev.Kv.ModRevision), next, nil
				}
				next = max(next, ev.Kv.ModRevision+1)
			}
		}
	}
}

func cutError(resp clientv3.WatchResponse, open bool) error {
	if !open {
		return errors.New("watch channel closed")
	}
	return resp.Err()
}

func sessionLost(g coordinator.Grant, s *coordinator.Session) *coordinator.Error {
	e := store.NewError(coordinator.ExpiredOwner, "run", g.Tenant, g.Task, "the session can no longer act", nil)
	e.Err = s.Err()
	var lost *coordinator.Error
	if errors.As(e.Err, &lost) { // the session's own expired_owner: keep only its cause
		e.Err = lost.Err
	}
	return e
}
