package drill

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

// A real trial's workers are processes: the drill's own binary (leasegate,
// or the test binary the drill runs in) started again with workerEnv set
// to a workerSpec. A fenced worker's spec is the gateway's address, the CA
// and its own certificate and key: it reaches etcd and the servers only
// through `leasegate serve --config` (fenced_real.go, realserve.go) and
// holds no credential of theirs. A naive worker — the incident's design,
// whose workers call the providers themselves — dials etcd itself (with
// the drill's client's TLS files and login: client.go), builds its own
// adapters on the real servers with their credentials, and keeps its own
// lease alive with its own heartbeat (realnaive.go). What only the drill
// can do — stamp and keep the trajectory, order the naive design's
// provider calls and credit their effects (watch), fire the faults at the
// servers, keep the naive workflow's history, and SIGSTOP the process in
// its window — a worker asks the drill for, one request at a time, as JSON
// lines on its stdout, each answered on its stdin (realproc.go serves
// them).

// workerEnv names the environment variable that makes a process a drill
// worker (its value: the workerSpec as JSON).
const workerEnv = "LEASEGATE_DRILL_WORKER"

// init turns the process into a drill worker when workerEnv is set: the
// drill re-executes whatever binary it runs in, so no main (leasegate's,
// a test binary's) needs to know about workers.
func init() {
	if spec, ok := os.LookupEnv(workerEnv); ok {
		os.Exit(workerMain(spec))
	}
}

// workerSpec is what a worker process is given.
type workerSpec struct {
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix"` // the coordinator's (the drill's trials)
	Design    Design   `json:"design"`
	Trial     int      `json:"trial"`
	Seed      uint64   `json:"seed"`
	Task      string   `json:"task"`
	Name      string   `json:"name"`
	First     bool     `json:"first"`
	// The fenced design's: the gateway's address, the CA its certificate
	// chains to, and the worker's own certificate and key.
	Gateway string `json:"gateway,omitempty"`
	CA      string `json:"ca,omitempty"`
	Cert    string `json:"cert,omitempty"`
	Key     string `json:"key,omitempty"`
	// The naive design's own access to the real servers: the pgpromote
	// nodes (the standby through the cut proxy), the password file, the
	// proxy's port for its own connection, and the DNS server with its
	// TSIG key file.
	Nodes        []pgpromote.Node `json:"nodes,omitempty"`
	PasswordFile string           `json:"password_file,omitempty"`
	ProxyPort    int              `json:"proxy_port,omitempty"`
	DNSAddr      string           `json:"dns_addr,omitempty"`
	Zone         string           `json:"zone,omitempty"`
	KeyFile      string           `json:"key_file,omitempty"`

	// Client is how to dial Endpoints as the drill's client does
	// (client.go: TLS files, user, the file of the password; nil: the
	// endpoints alone).
	Client *workerClient `json:"client,omitempty"`
}

// linkMsg is one line between a worker process and the drill: a request
// (Op set) from the worker, or the drill's answer to it.
type linkMsg struct {
	Op    string                  `json:"op,omitempty"`
	Event *Event                  `json:"event,omitempty"`
	S     string                  `json:"s,omitempty"`
	S2    string                  `json:"s2,omitempty"`
	S3    string                  `json:"s3,omitempty"`
	N     int64                   `json:"n,omitempty"`
	N2    int64                   `json:"n2,omitempty"`
	B     bool                    `json:"b,omitempty"`
	D     coordinator.Disposition `json:"d,omitempty"`
}

// The requests a worker process makes (realproc.go's serve answers them).
const (
	opEvent         = "event"           // Event: add it to the trajectory, stamped now
	opFail          = "fail"            // S: the worker's error, D: its disposition (workerFailure)
	opHeld          = "held"            // answer B: a hold or an error stops claiming
	opSetHeld       = "set-held"        // B
	opSync          = "sync"            // copy the journal into the trajectory
	opClaimed       = "claimed"         // N epoch, N2 lease: the worker was granted the task
	opHistTimeout   = "history-timeout" // S: the worker whose open attempt timed out
	opHistStart     = "history-start"   // S worker, S2 key
	opHistClose     = "history-close"   // S worker
	opCompleted     = "completed"       // answer B
	opSetCompleted  = "set-completed"   // B
	opPromotes      = "promotes"        // S operation; answer N
	opBeforeCall    = "before-call"     // S "promote" or "traffic": order the call, fire its faults
	opAfterCall     = "after-call"      // S kind, S2 by, N epoch, S3 operation: credit its effects
	opWatch         = "watch"           // credit what changed to no one
	opStopStandby   = "stop-standby"    // the standby-stopped fault
	opPause         = "pause"           // S window, S2 where: the drill SIGSTOPs the process now
	opDone          = "done"            // the worker is done (before its session ends)
	linkMaxLineSize = 1 << 20
)

// workerLink is the worker process's end of the link.
type workerLink struct {
	mu  sync.Mutex
	in  *bufio.Scanner
	out *json.Encoder
}

// call sends m and waits for the drill's answer. A broken link (the drill
// gone) ends the process: there is no one left to work for.
func (l *workerLink) call(m linkMsg) linkMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.out.Encode(m); err != nil {
		os.Exit(3)
	}
	if !l.in.Scan() {
		os.Exit(3)
	}
	var a linkMsg
	if err := json.Unmarshal(l.in.Bytes(), &a); err != nil {
		fmt.Fprintf(os.Stderr, "drill worker: bad answer %q: %v\n", l.in.Text(), err)
		os.Exit(3)
	}
	return a
}

// fail reports the worker's error to the drill (opFail), with the
// disposition it names (coordinator.DispositionOf), which the drill keeps
// where it says what the worker saw of etcd (workerFailure).
func (l *workerLink) fail(err error) {
	l.call(linkMsg{Op: opFail, S: err.Error(), D: coordinator.DispositionOf(err)})
}

// workerMain runs one worker of one real trial and returns the process's
// exit status: 0 when the worker ran (its own errors went to the drill as
// opFail), 2 when it could not start — its error went to the drill as
// opFail first, so that a worker that could not reach etcd, or that etcd's
// auth refused, ends the run as a hold or a denial, not as the drill's own
// failure (its exit status alone says neither).
func workerMain(specJSON string) int {
	var sp workerSpec
	if err := json.Unmarshal([]byte(specJSON), &sp); err != nil {
		fmt.Fprintf(os.Stderr, "drill worker: %s: %v\n", workerEnv, err)
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), linkMaxLineSize)
	link := &workerLink{in: in, out: json.NewEncoder(os.Stdout)}
	ctx, cancel := context.WithTimeout(context.Background(), realTrialLimit)
	defer cancel()
	if sp.Design == Fenced {
		return fencedWorkerMain(ctx, sp, link)
	}
	w, err := newWorkerWorld(ctx, sp, link)
	if err != nil {
		fmt.Fprintf(os.Stderr, "drill worker %s: %v\n", sp.Name, err)
		link.fail(fmt.Errorf("could not start: %w", err))
		return 2
	}
	defer w.run.coord.Client().Close()
	wk := w.newWorker(sp.Name, sp.First)
	wk.run()
	link.call(linkMsg{Op: opDone})
	wk.endSession()
	return 0
}

// fencedWorkerMain runs one fenced worker of a real trial: its gateway
// client from the spec, the trial's plan drawn from the same seed, and the
// link for the rest. It dials nothing but the gateway.
func fencedWorkerMain(ctx context.Context, sp workerSpec, link *workerLink) int {
	c, err := realWorkerClient(sp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "drill worker %s: %v\n", sp.Name, err)
		link.fail(fmt.Errorf("could not start: %w", err))
		return 2
	}
	defer c.Close()
	run := &runner{cfg: config{Seed: sp.Seed, Logger: zap.NewNop()}}
	w := &realWorld{ctx: ctx, run: run, design: sp.Design, trial: sp.Trial, task: sp.Task,
		plan: newRealPlan(trialRNG(sp.Seed, sp.Trial)), start: time.Now(), remote: link}
	wk := w.newWorker(sp.Name, sp.First)
	if err := wk.runFencedReal(c); err != nil && !errors.Is(err, errStop) {
		w.fail(err)
	}
	link.call(linkMsg{Op: opDone})
	return 0
}

// newWorkerWorld is the worker process's view of the trial: its own etcd
// client and coordinator, its own adapters, the trial's plan drawn from
// the same seed, and the link for the rest.
func newWorkerWorld(ctx context.Context, sp workerSpec, link *workerLink) (*realWorld, error) {
	cfg, err := sp.Client.config(sp.Endpoints)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	client, err := clientv3.New(cfg)
	if err != nil { // it logs in: unauthenticated when etcd refused the credentials
		return nil, store.DialError("drill worker", sp.Endpoints, err)
	}
	// Bounded as one request: a worker that cannot reach etcd (a TLS or
	// login it lacks) fails now, not at the trial's limit.
	nctx, cancel := context.WithTimeout(ctx, coordinator.DefaultRequestTimeout)
	defer cancel()
	coord, err := coordinator.New(nctx, client, coordinator.WithPrefix(sp.Prefix), coordinator.WithClientConfig(cfg))
	if err != nil {
		return nil, errors.Join(err, client.Close())
	}
	p := &RealProviders{dns: &realprov.DNSServer{Addr: sp.DNSAddr, Zone: sp.Zone, KeyFile: sp.KeyFile},
		proxyPort: sp.ProxyPort, passwordFile: sp.PasswordFile}
	if p.pg, err = pgpromote.New(sp.Nodes, sp.PasswordFile, pgpromote.WithPromoteWait(realPromoteWait), pgpromote.WithDialTimeout(time.Second)); err == nil {
		p.up, err = dnsupdate.New(sp.DNSAddr, sp.Zone, sp.KeyFile, dnsupdate.WithTimeout(2*time.Second))
	}
	if err != nil {
		return nil, errors.Join(err, client.Close())
	}
	run := &runner{cfg: config{Seed: sp.Seed, Logger: zap.NewNop()}, coord: coord}
	return &realWorld{ctx: ctx, run: run, prov: p, design: sp.Design, trial: sp.Trial, task: sp.Task,
		plan: newRealPlan(trialRNG(sp.Seed, sp.Trial)), start: time.Now(), remote: link}, nil
}
