package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
)

// CommitFunc is the protected write a workload uses: fencedtxn.Commit, or a
// deliberately broken one to prove the checker has teeth.
type CommitFunc func(ctx context.Context, c *coordinator.Coordinator, g coordinator.Grant, in fencedtxn.Intent) (fencedtxn.Receipt, error)

// FencedCommit is leasegate's commit.
func FencedCommit(ctx context.Context, c *coordinator.Coordinator, g coordinator.Grant, in fencedtxn.Intent) (fencedtxn.Receipt, error) {
	return fencedtxn.Commit(ctx, c, g, in)
}

// UnfencedCommit is a broken commit, for the checker's teeth: the same
// writes as fencedtxn.Commit, built through coordinator's Txn, with every
// fence compare (coordinator.Guard) removed — only "operation not yet
// recorded" and "state at the expected version" remain, as a worker holding
// a plain etcd lock would write.
func UnfencedCommit(ctx context.Context, c *coordinator.Coordinator, g coordinator.Grant, in fencedtxn.Intent) (fencedtxn.Receipt, error) {
	k := c.Keys()
	stateKey, opKey := k.State(in.Tenant, in.Task), k.Op(in.Tenant, in.Task, in.Operation)
	receipt := fencedtxn.Receipt{Disposition: coordinator.Committed, Tenant: in.Tenant, Task: in.Task, Operation: in.Operation,
		CommittedVersion: in.ExpectedVersion + 1, Epoch: g.Epoch}
	stored, _ := json.Marshal(receipt)
	opValue, _ := json.Marshal(store.OpRecord{PayloadDigest: fencedtxn.Digest(in), Receipt: stored, Epoch: g.Epoch, Owner: g.Owner})
	stateValue, _ := json.Marshal(store.StateRecord{Version: in.ExpectedVersion + 1, Value: in.Value, Operation: in.Operation, Epoch: g.Epoch})
	resp, err := store.Of(c).Txn(ctx, store.TxnRequest{Op: "commit", Tenant: in.Tenant, Task: in.Task,
		If: []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(opKey), "=", 0),
			clientv3.Compare(clientv3.Version(stateKey), "=", in.ExpectedVersion),
		},
		Then: []clientv3.Op{clientv3.OpPut(stateKey, string(stateValue)), clientv3.OpPut(opKey, string(opValue))},
		Else: []clientv3.Op{clientv3.OpGet(opKey)},
	})
	switch {
	case err != nil:
		return fencedtxn.Receipt{}, err
	case resp.Succeeded:
		receipt.Revision = resp.Header.Revision
		return receipt, nil
	case len(resp.Responses[0].GetResponseRange().GetKvs()) > 0:
		receipt.Disposition = coordinator.HistoricalRetry
		return receipt, nil
	}
	return fencedtxn.Receipt{}, store.NewError(coordinator.VersionConflict, "commit", in.Tenant, in.Task, "version moved", nil)
}

// Workload is concurrent clients claiming, committing to, reading and
// releasing a few tasks. Clients 0..Clients-1 are in-process (coordinator
// and fencedtxn on their own etcd client), each through its own
// embedtest.ClientProxy so that faults can hit one client alone; clients
// Clients..Clients+GatewayClients-1 go through Gateway's replicas with the
// Go client (client.Client over mTLS), each through its own hop
// (embedtest.Proxy) to the gateway. All record into one History.
type Workload struct {
	Cluster *embedtest.Cluster
	History *History
	Prefix  string
	Tenant  string
	Tasks   []string
	Clients int
	TTL     time.Duration
	Commit  CommitFunc // in-process clients' commit (default FencedCommit)
	Seed    int64

	// Gateway, if set, serves the GatewayClients gateway clients.
	Gateway        *Gateways
	GatewayClients int

	// OpTimeout bounds each call (default 3 s): a call cut short by it is
	// outcome_unknown if it was sent.
	OpTimeout time.Duration
	// IgnoreDeadline makes clients act on a grant past their session's
	// local deadline, as a paused process does when it wakes: only the
	// authority can stop them.
	IgnoreDeadline bool

	proxies []*embedtest.ClientProxy // in-process clients'
	hops    []*embedtest.Proxy       // gateway clients' (index i-Clients)
	holding []atomic.Bool            // client i is acting on a grant
	armed   []atomic.Pointer[func()] // run by client i before its next commit
	mu      sync.Mutex
	errs    []error
}

// Proxy is in-process client i's proxy (valid once Start returned).
func (w *Workload) Proxy(i int) *embedtest.ClientProxy { return w.proxies[i] }

// Hop is gateway client i's proxy to the gateway (i counts from Clients).
func (w *Workload) Hop(i int) *embedtest.Proxy { return w.hops[i-w.Clients] }

// Gatewayed reports whether client i goes through the gateway.
func (w *Workload) Gatewayed(i int) bool { return i >= w.Clients }

// Holding lists the clients acting on a grant now.
func (w *Workload) Holding() []int {
	var out []int
	for i := range w.holding {
		if w.holding[i].Load() {
			out = append(out, i)
		}
	}
	return out
}

// BeforeNextCommit has client i run f just before it sends its next
// commit (after its read), so that a fault set by f hits a commit in
// flight. fired closes once f has run; disarm withdraws f if it has not
// run yet, and reports whether it withdrew it.
func (w *Workload) BeforeNextCommit(i int, f func()) (fired <-chan struct{}, disarm func() bool) {
	ch := make(chan struct{})
	g := func() { f(); close(ch) }
	w.armed[i].Store(&g)
	return ch, func() bool { return w.armed[i].CompareAndSwap(&g, nil) }
}

// Start starts the clients; they run until stop is done, and the returned
// wait function returns when they all have, with the first client that
// could not run at all. Proxies close with Close.
func (w *Workload) Start(stop <-chan struct{}) (wait func() error, err error) {
	if w.Commit == nil {
		w.Commit = FencedCommit
	}
	if w.OpTimeout == 0 {
		w.OpTimeout = 3 * time.Second
	}
	if w.GatewayClients > 0 && w.Gateway == nil {
		return nil, errors.New("robustness: gateway clients without a gateway")
	}
	for i := 0; i < w.Clients; i++ {
		cp, err := w.Cluster.NewClientProxy()
		if err != nil {
			w.Close()
			return nil, err
		}
		w.proxies = append(w.proxies, cp)
	}
	for i := 0; i < w.GatewayClients; i++ {
		p, err := w.Gateway.Hop(i)
		if err != nil {
			w.Close()
			return nil, err
		}
		w.hops = append(w.hops, p)
	}
	n := w.Clients + w.GatewayClients
	for i := w.Clients; i < n; i++ {
		w.History.Gatewayed(i)
	}
	w.holding = make([]atomic.Bool, n)
	w.armed = make([]atomic.Pointer[func()], n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := w.client(stop, i); err != nil {
				w.mu.Lock()
				w.errs = append(w.errs, fmt.Errorf("client %d: %w", i, err))
				w.mu.Unlock()
			}
		}(i)
	}
	return func() error {
		wg.Wait()
		w.mu.Lock()
		defer w.mu.Unlock()
		return errors.Join(w.errs...)
	}, nil
}

// Close closes the in-process clients' proxies (the hops are the
// Gateway's).
func (w *Workload) Close() {
	for _, cp := range w.proxies {
		cp.Close()
	}
}

// actor is one client's way to the authority: in-process or through the
// gateway. Its calls return what the caller learns, as the Go API's
// values and *coordinator.Error.
type actor interface {
	// open makes sure there is a live session (a new one if the last
	// ended); false if none could be had.
	open(ctx context.Context) bool
	// me is the session's identity in the model (OwnerID).
	me() string
	// ended is the session's end (nil while live).
	ended() error
	claim(ctx context.Context, tenant, task string) (coordinator.Grant, error)
	get(ctx context.Context, tenant, task string) (fencedtxn.State, error)
	commit(ctx context.Context, g coordinator.Grant, in fencedtxn.Intent) (fencedtxn.Receipt, error)
	release(ctx context.Context, g coordinator.Grant) error
	close()
}

// inProcess is an actor on its own etcd client.
type inProcess struct {
	w        *Workload
	owner    string
	cli      *clientv3.Client
	c        *coordinator.Coordinator
	s        *coordinator.Session
	commitFn CommitFunc
}

func (a *inProcess) open(ctx context.Context) bool {
	var err error
	if a.c == nil {
		if a.c, err = coordinator.New(ctx, a.cli, coordinator.WithPrefix(a.w.Prefix)); err != nil {
			a.c = nil
			return false
		}
	}
	if a.s != nil && a.s.Err() == nil {
		return true
	}
	if a.s != nil {
		_ = a.s.Close(ctx)
	}
	if a.s, err = a.c.NewSession(ctx, a.owner, a.w.TTL); err != nil {
		a.s = nil
	}
	return a.s != nil
}

func (a *inProcess) me() string   { return OwnerID(a.owner, a.s.Lease()) }
func (a *inProcess) ended() error { return a.s.Err() }
func (a *inProcess) claim(ctx context.Context, tenant, task string) (coordinator.Grant, error) {
	return a.s.Claim(ctx, tenant, task)
}
func (a *inProcess) get(ctx context.Context, tenant, task string) (fencedtxn.State, error) {
	return fencedtxn.Get(ctx, a.c, tenant, task)
}
func (a *inProcess) commit(ctx context.Context, g coordinator.Grant, in fencedtxn.Intent) (fencedtxn.Receipt, error) {
	return a.commitFn(ctx, a.c, g, in)
}
func (a *inProcess) release(ctx context.Context, g coordinator.Grant) error {
	return a.c.Release(ctx, g)
}
func (a *inProcess) close() {
	if a.s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = a.s.Close(ctx)
		cancel()
	}
	_ = a.cli.Close()
}

// throughGateway is an actor that reaches the authority only through a
// gateway replica, with the Go client and a keepalive session.
type throughGateway struct {
	w  *Workload
	gc *client.Client
	s  *client.Session
}

func (a *throughGateway) open(ctx context.Context) bool {
	if a.s != nil && a.s.Err() == nil {
		return true
	}
	if a.s != nil {
		_ = a.s.Close(ctx)
	}
	s, err := a.gc.OpenSession(ctx, a.w.TTL, client.WithKeepAlive())
	if err != nil {
		a.s = nil
		return false
	}
	a.s = s
	return true
}

func (a *throughGateway) me() string   { return OwnerID(a.s.Owner(), a.s.Lease()) }
func (a *throughGateway) ended() error { return a.s.Err() }
func (a *throughGateway) claim(ctx context.Context, tenant, task string) (coordinator.Grant, error) {
	return a.s.Claim(ctx, tenant, task)
}
func (a *throughGateway) get(ctx context.Context, tenant, task string) (fencedtxn.State, error) {
	return a.gc.Get(ctx, tenant, task)
}
func (a *throughGateway) commit(ctx context.Context, g coordinator.Grant, in fencedtxn.Intent) (fencedtxn.Receipt, error) {
	return a.gc.Commit(ctx, g, in)
}
func (a *throughGateway) release(ctx context.Context, g coordinator.Grant) error {
	return a.gc.Release(ctx, g)
}
func (a *throughGateway) close() {
	if a.s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = a.s.Close(ctx)
		cancel()
	}
	a.gc.Close()
}

func (w *Workload) actor(i int) (actor, error) {
	if !w.Gatewayed(i) {
		cli, err := w.proxies[i].NewClient()
		if err != nil {
			return nil, err
		}
		return &inProcess{w: w, owner: fmt.Sprintf("w%d", i), cli: cli, commitFn: w.Commit}, nil
	}
	gc, err := w.Gateway.Client(i-w.Clients, w.Hop(i))
	if err != nil {
		return nil, err
	}
	return &throughGateway{w: w, gc: gc}, nil
}

func (w *Workload) client(stop <-chan struct{}, i int) error {
	a, err := w.actor(i)
	if err != nil {
		return err
	}
	defer a.close()
	rng := rand.New(rand.NewSource(w.Seed + int64(i)))
	pause := func() bool { // a short breath after a failure, or stop
		t := time.NewTimer(time.Duration(20+rng.Intn(80)) * time.Millisecond)
		defer t.Stop()
		select {
		case <-stop:
			return false
		case <-t.C:
			return true
		}
	}
	seq := 0
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
		ok := a.open(ctx)
		cancel()
		if !ok {
			if !pause() {
				return nil
			}
			continue
		}
		task := w.Tasks[rng.Intn(len(w.Tasks))]
		me := a.me()
		g, ok := w.claim(i, a, task, me)
		if !ok {
			if !pause() {
				return nil
			}
			continue
		}
		w.holding[i].Store(true)
		for n := 1 + rng.Intn(3); n > 0; n-- {
			if !w.IgnoreDeadline && a.ended() != nil {
				break // stop acting past the local deadline
			}
			seq++
			if !w.commit(i, a, g, me, fmt.Sprintf("w%d-%d", i, seq)) {
				break
			}
		}
		if rng.Intn(3) > 0 {
			w.release(i, a, g, me)
		}
		w.holding[i].Store(false)
	}
}

func (w *Workload) claim(i int, a actor, task, me string) (coordinator.Grant, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	defer cancel()
	call := w.History.Now()
	g, err := a.claim(ctx, w.Tenant, task)
	out := OutputOf(coordinator.Granted, err)
	out.Epoch = max(out.Epoch, g.Epoch)
	w.History.Record(i, Input{Kind: Claim, Task: task, Owner: me}, call, out)
	return g, err == nil
}

// commit reads the task's state, then commits one operation against it;
// an unknown outcome is retried with the same intent until it is known.
// It reports whether the client may go on acting for the task.
func (w *Workload) commit(i int, a actor, g coordinator.Grant, me, op string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	call := w.History.Now()
	st, err := a.get(ctx, g.Tenant, g.Task)
	cancel()
	if err != nil {
		return true // a failed read has no effect and tells nothing
	}
	w.History.Record(i, Input{Kind: Read, Task: g.Task}, call, Output{Disposition: coordinator.OK, Version: st.Version, Value: string(st.Value)})
	in := fencedtxn.Intent{Tenant: g.Tenant, Task: g.Task, Operation: op, Value: []byte(op), ExpectedVersion: st.Version}
	if f := w.armed[i].Swap(nil); f != nil {
		(*f)()
	}
	for try := 0; try < 5; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
		call := w.History.Now()
		r, err := a.commit(ctx, g, in)
		cancel()
		out := OutputOf(coordinator.Committed, err)
		if err == nil {
			out.Disposition, out.Version, out.Epoch, out.Revision = r.Disposition, r.CommittedVersion, r.Epoch, r.Revision
		}
		w.History.Record(i, Input{Kind: Commit, Task: g.Task, Owner: me, Epoch: g.Epoch, Operation: op,
			Value: op, Expected: st.Version}, call, out)
		switch out.Disposition {
		case coordinator.OutcomeUnknown:
			continue // the same intent, to learn
		case coordinator.AuthorityUnavailable:
			return false
		case coordinator.Committed, coordinator.HistoricalRetry, coordinator.VersionConflict:
			return true
		}
		return false // refused: stop acting for the task
	}
	return false
}

func (w *Workload) release(i int, a actor, g coordinator.Grant, me string) {
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	defer cancel()
	call := w.History.Now()
	err := a.release(ctx, g)
	w.History.Record(i, Input{Kind: Release, Task: g.Task, Owner: me, Epoch: g.Epoch}, call, OutputOf(coordinator.Released, err))
}

// Verify reads, once every fault is healed, what the run left: every
// acknowledged commit is recorded, each task's state version equals the
// number of its recorded operations (nothing applied twice), and every
// receipt a client was given for an operation — the first answer and each
// retry's, in-process or through the gateway — is the original one as
// etcd holds it: the operation record's ModRevision, its committed
// version and its epoch. The final reads go into the history. It returns
// the violations found.
func (w *Workload) Verify(ctx context.Context, cli *clientv3.Client) ([]string, error) {
	c, err := coordinator.New(ctx, cli, coordinator.WithPrefix(w.Prefix))
	if err != nil {
		return nil, err
	}
	var violations []string
	acked := w.History.Acknowledged()
	receipts := w.History.Receipts()
	for _, task := range w.Tasks {
		call := w.History.Now()
		st, err := fencedtxn.Get(ctx, c, w.Tenant, task)
		if err != nil {
			return nil, err
		}
		w.History.Record(w.Clients+w.GatewayClients, Input{Kind: Read, Task: task}, call, Output{Disposition: coordinator.OK, Version: st.Version, Value: string(st.Value)})
		resp, err := cli.Get(ctx, c.Keys().Op(w.Tenant, task, ""), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		if int64(len(resp.Kvs)) != st.Version {
			violations = append(violations, fmt.Sprintf("task %s: state version %d, %d operation records", task, st.Version, len(resp.Kvs)))
		}
		for op, t := range acked {
			if t != task {
				continue
			}
			got, err := cli.Get(ctx, c.Keys().Op(w.Tenant, task, op))
			if err != nil {
				return nil, err
			}
			if len(got.Kvs) != 1 {
				violations = append(violations, fmt.Sprintf("task %s: acknowledged operation %s is not recorded", task, op))
				continue
			}
			orig, err := originalReceipt(got.Kvs[0].Value)
			if err != nil {
				violations = append(violations, fmt.Sprintf("task %s: operation %s: %v", task, op, err))
				continue
			}
			orig.Revision = got.Kvs[0].ModRevision
			for _, r := range receipts[op] {
				if r.ReceiptSeen != orig {
					violations = append(violations, fmt.Sprintf("task %s: operation %s: client %d was answered %+v; etcd holds %+v",
						task, op, r.Client, r.ReceiptSeen, orig))
				}
			}
		}
	}
	return violations, nil
}

// originalReceipt is the receipt an operation record holds (its revision
// is the record's ModRevision, which the caller fills in).
func originalReceipt(value []byte) (ReceiptSeen, error) {
	var rec struct {
		Receipt json.RawMessage `json:"receipt"`
		Epoch   int64           `json:"epoch"`
	}
	var r fencedtxn.Receipt
	if err := json.Unmarshal(value, &rec); err != nil {
		return ReceiptSeen{}, fmt.Errorf("operation record: %w", err)
	}
	if err := json.Unmarshal(rec.Receipt, &r); err != nil {
		return ReceiptSeen{}, fmt.Errorf("operation record's receipt: %w", err)
	}
	if r.Epoch != rec.Epoch {
		return ReceiptSeen{}, fmt.Errorf("operation record of epoch %d holds a receipt of epoch %d", rec.Epoch, r.Epoch)
	}
	return ReceiptSeen{Version: r.CommittedVersion, Epoch: r.Epoch}, nil
}
