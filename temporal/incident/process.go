package incident

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	lgtemporal "github.com/leasegate/leasegate/temporal"
)

// The environment of a worker process (RunWorkerFromEnv).
const (
	envWorker    = "LEASEGATE_INCIDENT_WORKER" // the identity; its presence makes this process a worker
	envGateway   = "LEASEGATE_INCIDENT_GATEWAY"
	envCA        = "LEASEGATE_INCIDENT_CA"
	envCert      = "LEASEGATE_INCIDENT_CERT"
	envKey       = "LEASEGATE_INCIDENT_KEY"
	envTemporal  = "LEASEGATE_INCIDENT_TEMPORAL"
	envNamespace = "LEASEGATE_INCIDENT_NAMESPACE"
	envShape     = "LEASEGATE_INCIDENT_SHAPE" // naive or fenced
	envPause     = "LEASEGATE_INCIDENT_PAUSE" // "1": SIGSTOP itself right after its first dispatch's answer
)

// Event is one line a worker process prints on stdout.
type Event struct {
	Event  string `json:"event"`            // started, paused, woke, late-call, activity-done
	Detail string `json:"detail,omitempty"` // for late-call: the gateway's disposition
	Op     string `json:"op,omitempty"`
	Epoch  int64  `json:"epoch,omitempty"`
}

// RunWorkerFromEnv turns this process into an activity worker when the
// replay started it as one (its environment says so): it serves the
// activity queue until SIGTERM, then exits. It returns false at once in any
// other process. Call it first thing in main and in TestMain.
func RunWorkerFromEnv() bool {
	if os.Getenv(envWorker) == "" {
		return false
	}
	if err := runWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "incident worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

var stdout sync.Mutex

func emit(e Event) {
	b, _ := json.Marshal(e)
	stdout.Lock()
	defer stdout.Unlock()
	fmt.Fprintln(os.Stdout, string(b))
}

func runWorker() error {
	tlsCfg, err := client.TLSConfig(os.Getenv(envCA), os.Getenv(envCert), os.Getenv(envKey))
	if err != nil {
		return err
	}
	hc := client.HTTPClient(tlsCfg)
	if os.Getenv(envPause) == "1" {
		// The late call goes around the pausing transport, on a client of
		// its own (the same identity).
		plain, err := client.NewWithHTTPClient(os.Getenv(envGateway), client.HTTPClient(tlsCfg))
		if err != nil {
			return err
		}
		hc = &http.Client{Transport: &pausing{next: hc.Transport, late: os.Getenv(envShape) == "fenced", client: plain}}
	}
	gc, err := client.NewWithHTTPClient(os.Getenv(envGateway), hc)
	if err != nil {
		return err
	}
	tc, err := sdkclient.Dial(sdkclient.Options{HostPort: os.Getenv(envTemporal), Namespace: os.Getenv(envNamespace), Logger: quiet{}})
	if err != nil {
		return err
	}
	defer tc.Close()
	// One activity at a time: a worker paused inside its activity then
	// holds no poll the server could hand the next attempt to.
	w := worker.New(tc, ActivityQueue, worker.Options{MaxConcurrentActivityExecutionSize: 1})
	switch os.Getenv(envShape) {
	case "naive":
		n := Naive{C: gc}
		w.RegisterActivityWithOptions(func(ctx context.Context, p Plan) error {
			err := n.RecoverRegion(ctx, p)
			detail := "ok"
			if err != nil {
				detail = err.Error()
			}
			emit(Event{Event: "activity-done", Detail: detail})
			return err
		}, activity.RegisterOptions{Name: RecoverRegionActivity})
	default:
		acts, err := lgtemporal.NewActivities(gc, TTL, Poll)
		if err != nil {
			return err
		}
		w.RegisterActivityWithOptions(reporting(acts), activityOptions)
	}
	if err := w.Start(); err != nil {
		return err
	}
	emit(Event{Event: "started"})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	w.Stop()
	return nil
}

// pausing stops this process (SIGSTOP) right after the answer to its first
// Dispatch arrived — the provider has acknowledged, the activity has not
// yet seen it — and, once continued (SIGCONT), in the fenced shape makes
// the seed's late call: worker A's traffic change, under the grant its
// attempt held, before handing the answer on.
type pausing struct {
	next   http.RoundTripper
	late   bool
	client *client.Client
	once   sync.Once
}

func (p *pausing) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/Dispatch") {
		return p.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := p.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	p.once.Do(func() {
		var req leasegatev1.DispatchRequest
		_ = proto.Unmarshal(body, &req)
		emit(Event{Event: "paused", Op: req.GetOperation(), Epoch: req.GetGrant().GetEpoch()})
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		emit(Event{Event: "woke", Op: req.GetOperation()})
		if p.late {
			p.lateCall(&req)
		}
	})
	return resp, nil
}

// lateCall is the seed's worker A waking: its next action is a traffic
// change under the grant it held. The fenced shape would schedule no such
// call in A (traffic is the workflow's next activity); it is made here, from
// A's process and under A's grant, to show what the gateway does with it.
func (p *pausing) lateCall(req *leasegatev1.DispatchRequest) {
	g := req.GetGrant()
	grant := coordinator.Grant{Realm: g.GetRealm(), Tenant: g.GetTenant(), Task: g.GetTask(), Owner: g.GetOwner(), Epoch: g.GetEpoch()}
	lease, err := coordinator.ParseLeaseID(g.GetLease())
	if err != nil {
		emit(Event{Event: "late-call", Detail: "bad grant: " + err.Error()})
		return
	}
	grant.Lease = lease
	op, err := lgtemporal.OperationIDOf(grant.Task, "traffic")
	if err != nil {
		emit(Event{Event: "late-call", Detail: err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = p.client.Dispatch(ctx, grant, op)
	emit(Event{Event: "late-call", Op: op, Epoch: grant.Epoch, Detail: string(coordinator.DispositionOf(err))})
}

var activityOptions = activity.RegisterOptions{Name: lgtemporal.EffectActivity}

// reporting is the effect activity, printing activity-done as it returns.
func reporting(a *lgtemporal.Activities) func(context.Context, lgtemporal.Step) (ledger.Record, error) {
	return func(ctx context.Context, s lgtemporal.Step) (ledger.Record, error) {
		rec, err := a.Effect(ctx, s)
		detail := "ok"
		if err != nil {
			detail = err.Error()
		}
		emit(Event{Event: "activity-done", Op: s.Operation, Detail: detail})
		return rec, err
	}
}

// quiet is a Temporal logger that logs warnings and errors only.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"temporal warn:", msg}, kv...)...)
}
func (quiet) Error(msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"temporal error:", msg}, kv...)...)
}

// Process is a worker process of the replay.
type Process struct {
	Cmd    *exec.Cmd
	Events chan Event
	done   chan struct{}
}

// WorkerEnv is what a worker process needs to find the gateway and
// Temporal.
type WorkerEnv struct {
	Identity  string
	Temporal  string // host:port
	Namespace string
	Shape     string // naive or fenced
	Pause     bool
}

// Spawn starts exe (a program that calls RunWorkerFromEnv first) as a
// worker process of w, and waits for it to say it started.
func (w *World) Spawn(ctx context.Context, exe string, args []string, e WorkerEnv) (*Process, error) {
	f, ok := w.Certs.Clients[e.Identity]
	if !ok {
		return nil, fmt.Errorf("incident: no identity %q", e.Identity)
	}
	pause := "0"
	if e.Pause {
		pause = "1"
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envWorker+"="+e.Identity, envGateway+"="+w.URL, envCA+"="+w.Certs.CA,
		envCert+"="+f.Cert, envKey+"="+f.Key, envTemporal+"="+e.Temporal, envNamespace+"="+e.Namespace,
		envShape+"="+e.Shape, envPause+"="+pause)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, Events: make(chan Event, 64), done: make(chan struct{})}
	go func() {
		defer close(p.Events)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				p.Events <- ev
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	if _, err := p.Await(ctx, "started"); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// Await waits for the process's next event named name (earlier events of
// other names are dropped).
func (p *Process) Await(ctx context.Context, name string) (Event, error) {
	for {
		select {
		case <-ctx.Done():
			return Event{}, fmt.Errorf("incident: waiting for %q from worker %d: %w", name, p.Cmd.Process.Pid, ctx.Err())
		case ev, ok := <-p.Events:
			if !ok {
				return Event{}, fmt.Errorf("incident: worker %d exited before %q", p.Cmd.Process.Pid, name)
			}
			if ev.Event == name {
				return ev, nil
			}
		}
	}
}

// Stopped reports whether the process is stopped (SIGSTOP): its state in
// /proc is T.
func (p *Process) Stopped() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Kill ends the process (continuing it first if stopped) and waits for it.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to stop (SIGCONT then SIGTERM) and waits up to
// grace before killing it.
func (p *Process) Stop(grace time.Duration) {
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}
