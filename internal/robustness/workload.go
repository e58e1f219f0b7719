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

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
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
	opValue, _ := json.Marshal(coordinator.OpRecord{PayloadDigest: fencedtxn.Digest(in), Receipt: stored, Epoch: g.Epoch, Owner: g.Owner})
	stateValue, _ := json.Marshal(coordinator.StateRecord{Version: in.ExpectedVersion + 1, Value: in.Value, Operation: in.Operation, Epoch: g.Epoch})
	resp, err := c.Txn(ctx, coordinator.TxnRequest{Op: "commit", Tenant: in.Tenant, Task: in.Task,
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
	return fencedtxn.Receipt{}, coordinator.Refusal(coordinator.VersionConflict, "commit", in.Tenant, in.Task, "version moved")
}

// Workload is concurrent clients claiming, committing to, reading and
// releasing a few tasks, each client through its own embedtest.ClientProxy
// so that faults can hit one client alone.
type Workload struct {
	Cluster *embedtest.Cluster
	History *History
	Prefix  string
	Tenant  string
	Tasks   []string
	Clients int
	TTL     time.Duration
	Commit  CommitFunc // default FencedCommit
	Seed    int64

	// OpTimeout bounds each call (default 3 s): a call cut short by it is
	// outcome_unknown if it was sent.
	OpTimeout time.Duration
	// IgnoreDeadline makes clients act on a grant past their session's
	// local deadline, as a paused process does when it wakes: only the
	// authority can stop them.
	IgnoreDeadline bool

	proxies []*embedtest.ClientProxy
	holding []atomic.Bool // client i is acting on a grant
	mu      sync.Mutex
	errs    []error
}

// Proxy is client i's proxy (valid once Start returned).
func (w *Workload) Proxy(i int) *embedtest.ClientProxy { return w.proxies[i] }

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
	for i := 0; i < w.Clients; i++ {
		cp, err := w.Cluster.NewClientProxy()
		if err != nil {
			w.Close()
			return nil, err
		}
		w.proxies = append(w.proxies, cp)
	}
	w.holding = make([]atomic.Bool, w.Clients)
	var wg sync.WaitGroup
	for i := 0; i < w.Clients; i++ {
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

// Close closes the clients' proxies.
func (w *Workload) Close() {
	for _, cp := range w.proxies {
		cp.Close()
	}
}

func (w *Workload) client(stop <-chan struct{}, i int) error {
	cli, err := w.proxies[i].NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	rng := rand.New(rand.NewSource(w.Seed + int64(i)))
	owner := fmt.Sprintf("w%d", i)
	var c *coordinator.Coordinator
	var s *coordinator.Session
	defer func() {
		if s != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.Close(ctx)
			cancel()
		}
	}()
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
		if c == nil {
			c, err = coordinator.New(ctx, cli, coordinator.WithPrefix(w.Prefix))
			if err != nil {
				c = nil
			}
		}
		if c != nil && (s == nil || s.Err() != nil) {
			if s != nil {
				_ = s.Close(ctx)
			}
			s, err = c.NewSession(ctx, owner, w.TTL)
			if err != nil {
				s = nil
			}
		}
		cancel()
		if c == nil || s == nil {
			if !pause() {
				return nil
			}
			continue
		}
		task := w.Tasks[rng.Intn(len(w.Tasks))]
		me := OwnerID(owner, s.Lease())
		g, ok := w.claim(i, s, task, me)
		if !ok {
			if !pause() {
				return nil
			}
			continue
		}
		w.holding[i].Store(true)
		for n := 1 + rng.Intn(3); n > 0; n-- {
			if !w.IgnoreDeadline && s.Err() != nil {
				break // stop acting past the local deadline
			}
			seq++
			if !w.commit(i, c, g, me, fmt.Sprintf("w%d-%d", i, seq)) {
				break
			}
		}
		if rng.Intn(3) > 0 {
			w.release(i, c, g, me)
		}
		w.holding[i].Store(false)
	}
}

func (w *Workload) claim(i int, s *coordinator.Session, task, me string) (coordinator.Grant, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	defer cancel()
	call := w.History.Now()
	g, err := s.Claim(ctx, w.Tenant, task)
	out := OutputOf(coordinator.Granted, err)
	out.Epoch = max(out.Epoch, g.Epoch)
	w.History.Record(i, Input{Kind: Claim, Task: task, Owner: me}, call, out)
	return g, err == nil
}

// commit reads the task's state, then commits one operation against it;
// an unknown outcome is retried with the same intent until it is known.
// It reports whether the client may go on acting for the task.
func (w *Workload) commit(i int, c *coordinator.Coordinator, g coordinator.Grant, me, op string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	call := w.History.Now()
	st, err := fencedtxn.Get(ctx, c, g.Tenant, g.Task)
	cancel()
	if err != nil {
		return true // a failed read has no effect and tells nothing
	}
	w.History.Record(i, Input{Kind: Read, Task: g.Task}, call, Output{Version: st.Version, Value: string(st.Value)})
	in := fencedtxn.Intent{Tenant: g.Tenant, Task: g.Task, Operation: op, Value: []byte(op), ExpectedVersion: st.Version}
	for try := 0; try < 5; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
		call := w.History.Now()
		r, err := w.Commit(ctx, c, g, in)
		cancel()
		out := OutputOf(coordinator.Committed, err)
		if err == nil {
			out.Disposition, out.Version = r.Disposition, r.CommittedVersion
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

func (w *Workload) release(i int, c *coordinator.Coordinator, g coordinator.Grant, me string) {
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	defer cancel()
	call := w.History.Now()
	err := c.Release(ctx, g)
	w.History.Record(i, Input{Kind: Release, Task: g.Task, Owner: me, Epoch: g.Epoch}, call, OutputOf(coordinator.Released, err))
}

// Verify reads, once every fault is healed, what the run left: every
// acknowledged commit is recorded, and each task's state version equals
// the number of its recorded operations (nothing applied twice). The
// final reads go into the history. It returns the violations found.
func (w *Workload) Verify(ctx context.Context, cli *clientv3.Client) ([]string, error) {
	c, err := coordinator.New(ctx, cli, coordinator.WithPrefix(w.Prefix))
	if err != nil {
		return nil, err
	}
	var violations []string
	acked := w.History.Acknowledged()
	for _, task := range w.Tasks {
		call := w.History.Now()
		st, err := fencedtxn.Get(ctx, c, w.Tenant, task)
		if err != nil {
			return nil, err
		}
		w.History.Record(w.Clients, Input{Kind: Read, Task: task}, call, Output{Version: st.Version, Value: string(st.Value)})
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
			got, err := cli.Get(ctx, c.Keys().Op(w.Tenant, task, op), clientv3.WithCountOnly())
			if err != nil {
				return nil, err
			}
			if got.Count != 1 {
				violations = append(violations, fmt.Sprintf("task %s: acknowledged operation %s is not recorded", task, op))
			}
		}
	}
	return violations, nil
}
