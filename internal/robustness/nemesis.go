package robustness

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"time"

	"github.com/leasegate/leasegate/embedtest"
)

// A Fault injects one fault into a running workload, holds it, heals it,
// and returns once the cluster has a leader again.
type Fault func(ctx context.Context, n *Nemesis) error

// Nemesis injects faults into a three-member cluster and the workload's
// client proxies, counting them in the history.
type Nemesis struct {
	Cluster  *embedtest.Cluster
	Workload *Workload
	History  *History
	Hold     time.Duration // how long a fault lasts (default 1 s)
	rng      *rand.Rand
	logf     func(format string, args ...any)
}

// Faults are the nemesis's faults by name.
var Faults = map[string]Fault{
	// The leader dies: no leadership transfer; the followers elect.
	"kill-leader": func(ctx context.Context, n *Nemesis) error {
		lead, err := n.Cluster.Leader(ctx)
		if err != nil {
			return err
		}
		if err := n.Cluster.Member(lead).Kill(); err != nil {
			return err
		}
		if err := n.hold(ctx, n.Hold); err != nil {
			return err
		}
		return n.Cluster.Member(lead).Start()
	},
	// A member (maybe the leader) stops gracefully and comes back.
	"restart-member": func(ctx context.Context, n *Nemesis) error {
		m := n.Cluster.Member(n.rng.Intn(n.Cluster.Size()))
		if err := m.Halt(); err != nil {
			return err
		}
		if err := n.hold(ctx, n.Hold); err != nil {
			return err
		}
		return m.Start()
	},
	// Two of three members die: no quorum, every write is a hold or
	// unknown until they come back.
	"lose-quorum": func(ctx context.Context, n *Nemesis) error {
		perm := n.rng.Perm(n.Cluster.Size())[:2]
		for _, i := range perm {
			if err := n.Cluster.Member(i).Kill(); err != nil {
				return err
			}
		}
		if err := n.hold(ctx, n.Hold); err != nil {
			return err
		}
		for _, i := range perm {
			if err := n.Cluster.Member(i).Start(); err != nil {
				return err
			}
		}
		return nil
	},
	// The leader is cut from its peers: the majority elects another; the
	// old leader's clients hang until it is healed.
	"partition-leader": func(ctx context.Context, n *Nemesis) error {
		lead, err := n.Cluster.Leader(ctx)
		if err != nil {
			return err
		}
		n.Cluster.Partition(lead)
		var rest []int
		for i := 0; i < n.Cluster.Size(); i++ {
			if i != lead {
				rest = append(rest, i)
			}
		}
		if _, err := n.Cluster.LeaderAmong(ctx, rest...); err != nil {
			n.Cluster.Heal()
			return err
		}
		err = n.hold(ctx, n.Hold)
		n.Cluster.Heal()
		return err
	},
	// Raft messages between the leader and one follower arrive late.
	"delay-peers": func(ctx context.Context, n *Nemesis) error {
		lead, err := n.Cluster.Leader(ctx)
		if err != nil {
			return err
		}
		n.Cluster.DelayLink(lead, (lead+1)%n.Cluster.Size(), 150*time.Millisecond)
		err = n.hold(ctx, n.Hold)
		n.Cluster.Heal()
		return err
	},
	// One client's answers are lost: its writes apply and it cannot know.
	"drop-answers": func(ctx context.Context, n *Nemesis) error {
		cp := n.client()
		cp.DropAnswers()
		err := n.hold(ctx, n.Hold)
		cp.Heal()
		return err
	},
	// One client's traffic is held and delivered late.
	"stall-client": func(ctx context.Context, n *Nemesis) error {
		cp := n.client()
		cp.Stall()
		err := n.hold(ctx, n.Hold)
		cp.Heal()
		return err
	},
	// One client's traffic is held past its TTL and then delivered: its
	// lease expires, others take over, and its held writes arrive late —
	// a paused process, seen from the network.
	"stall-client-past-ttl": func(ctx context.Context, n *Nemesis) error {
		cp := n.client()
		cp.Stall()
		err := n.hold(ctx, n.Workload.TTL+n.Hold)
		cp.Heal()
		return err
	},
	// One client is cut off past its TTL: its lease expires while its
	// process lives; others take its tasks over.
	"blackhole-client-past-ttl": func(ctx context.Context, n *Nemesis) error {
		cp := n.client()
		cp.Blackhole()
		err := n.hold(ctx, n.Workload.TTL+n.Hold)
		cp.Heal()
		return err
	},
}

// FaultNames lists the faults, sorted.
func FaultNames() []string {
	var names []string
	for k := range Faults {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Inject runs the named fault and waits for a leader again.
func (n *Nemesis) Inject(ctx context.Context, name string) error {
	f, ok := Faults[name]
	if !ok {
		return fmt.Errorf("robustness: no fault %q", name)
	}
	if n.rng == nil {
		n.rng = rand.New(rand.NewSource(time.Now().UnixNano()))
	}
	if n.Hold == 0 {
		n.Hold = time.Second
	}
	if n.logf == nil {
		n.logf = func(string, ...any) {}
	}
	n.History.Fault(name)
	start := time.Now()
	if err := f(ctx, n); err != nil {
		return fmt.Errorf("fault %s: %w", name, err)
	}
	if _, err := n.Cluster.Leader(ctx); err != nil {
		return fmt.Errorf("after fault %s: %w", name, err)
	}
	n.logf("fault %s: healed after %v", name, time.Since(start).Round(time.Millisecond))
	return nil
}

// Seed makes the nemesis's choices (members, clients) repeatable.
func (n *Nemesis) Seed(seed int64) { n.rng = rand.New(rand.NewSource(seed)) }

// client picks a client to fault, one acting on a grant if there is one:
// a fault on an idle client tests little.
func (n *Nemesis) client() *embedtest.ClientProxy {
	if h := n.Workload.Holding(); len(h) > 0 {
		i := h[n.rng.Intn(len(h))]
		n.logf("faulting client %d (holding: %v)", i, h)
		return n.Workload.Proxy(i)
	}
	return n.Workload.Proxy(n.rng.Intn(n.Workload.Clients))
}

// hold lets a fault last d: the fault's duration is what is being tested,
// so this is a timer, not a wait standing in for an event.
func (n *Nemesis) hold(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
