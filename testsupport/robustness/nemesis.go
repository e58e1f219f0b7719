package robustness

import (
	"context"
	"errors"
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

// GatewayFaults are the faults of the gateway's path, by name: the
// network between a worker and the gateway (its hop), and the gateway's
// replicas themselves. They need a workload with gateway clients.
var GatewayFaults = map[string]Fault{
	// A worker's connections to the gateway close and new ones are
	// refused: a call that had not left is a hold; one that had, unknown.
	"cut-gateway-hop": func(ctx context.Context, n *Nemesis) error {
		return n.onHop(ctx, (*embedtest.Proxy).Cut, n.Hold)
	},
	// A worker's traffic to and from the gateway is held and delivered
	// late, in order.
	"stall-gateway-hop": func(ctx context.Context, n *Nemesis) error {
		return n.onHop(ctx, (*embedtest.Proxy).Stall, n.Hold)
	},
	// Held past the TTL: the worker's renewals do not arrive, its lease
	// expires, another takes over, and its held calls reach the gateway
	// late — they must be refused, not applied.
	"stall-gateway-hop-past-ttl": func(ctx context.Context, n *Nemesis) error {
		return n.onHop(ctx, (*embedtest.Proxy).Stall, n.Workload.TTL+n.Hold)
	},
	// A worker is cut off from the gateway past its TTL, connections open.
	"blackhole-gateway-hop-past-ttl": func(ctx context.Context, n *Nemesis) error {
		return n.onHop(ctx, (*embedtest.Proxy).Blackhole, n.Workload.TTL+n.Hold)
	},
	// The gateway's answers to one worker are lost: its calls apply at the
	// gateway and it cannot know (outcome_unknown), so it retries the same
	// operation id.
	"drop-gateway-answers": func(ctx context.Context, n *Nemesis) error {
		return n.onHop(ctx, (*embedtest.Proxy).DropAnswers, n.Hold)
	},
	// The answer of a worker's next commit is lost between the gateway and
	// the worker, after etcd applied it: the worker must record
	// outcome_unknown and its retry with the same operation id must get
	// the original receipt back.
	"lose-gateway-commit-answer": func(ctx context.Context, n *Nemesis) error {
		w := n.Workload
		if w.Gateway == nil || w.GatewayClients == 0 {
			return errNoGateway
		}
		i := n.hopClient()
		if i < 0 {
			i = w.Clients + n.rng.Intn(w.GatewayClients)
		}
		lost, disarm := w.Gateway.LoseNextCommitAnswer(i - w.Clients)
		defer disarm()
		// An upper bound on the wait for that commit, not a stand-in for it.
		t := time.NewTimer(5 * (n.Hold + w.OpTimeout))
		defer t.Stop()
		select {
		case <-lost:
			n.logf("lost the answer of client %d's commit", i)
		case <-t.C:
			n.logf("client %d made no commit to lose the answer of", i)
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	},
	// Every chunk between a worker and the gateway arrives 150 ms late.
	"delay-gateway-hop": func(ctx context.Context, n *Nemesis) error {
		return n.onHop(ctx, func(p *embedtest.Proxy) { p.Delay(150 * time.Millisecond) }, n.Hold)
	},
	// A replica crashes (listener, connections and etcd client closed at
	// once) and is restarted on a new port: its workers' hops move to
	// another replica meanwhile (their sessions go on there: any replica
	// serves any call) and come back after.
	"kill-gateway-replica": func(ctx context.Context, n *Nemesis) error {
		g := n.Workload.Gateway
		if g == nil {
			return errNoGateway
		}
		i := n.rng.Intn(g.Replicas())
		if h := n.hopClient(); h >= 0 {
			i = g.ReplicaOf(n.Workload.Hop(h))
		}
		n.logf("killing gateway replica %d", i)
		if err := g.Kill(i); err != nil {
			return err
		}
		if err := n.hold(ctx, n.Hold); err != nil {
			return err
		}
		return g.Restart(ctx, i)
	},
}

var errNoGateway = errors.New("robustness: a gateway fault without gateway clients")

// FaultNames lists the faults of the cluster and of the clients' paths to
// etcd, sorted.
func FaultNames() []string { return names(Faults) }

// GatewayFaultNames lists GatewayFaults, sorted.
func GatewayFaultNames() []string { return names(GatewayFaults) }

func names(m map[string]Fault) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// onHop sets a fault on one gateway worker's hop for d, then heals it.
// The fault is set just before that worker's next commit leaves (or at
// once if it makes none within a bound), so that it hits a write in
// flight: between two calls, a fault of a second hits only a claim or a
// renewal.
func (n *Nemesis) onHop(ctx context.Context, set func(*embedtest.Proxy), d time.Duration) error {
	w := n.Workload
	if w.Gateway == nil || w.GatewayClients == 0 {
		return errNoGateway
	}
	i := w.Clients + n.rng.Intn(w.GatewayClients)
	p := w.Hop(i)
	fired, disarm := w.BeforeNextCommit(i, func() { set(p) })
	// An upper bound on the wait for that commit, not a stand-in for it.
	t := time.NewTimer(n.Hold + w.OpTimeout)
	defer t.Stop()
	select {
	case <-fired:
		n.logf("faulting the gateway hop of client %d at its commit", i)
	case <-t.C:
		if disarm() {
			set(p)
			n.logf("faulting the gateway hop of client %d (no commit came)", i)
		} else {
			<-fired
		}
	case <-ctx.Done():
		if !disarm() {
			<-fired
			p.Heal()
		}
		return ctx.Err()
	}
	err := n.hold(ctx, d)
	p.Heal()
	return err
}

// hopClient is a gateway client acting on a grant, or -1.
func (n *Nemesis) hopClient() int {
	var gw []int
	for _, i := range n.Workload.Holding() {
		if n.Workload.Gatewayed(i) {
			gw = append(gw, i)
		}
	}
	if len(gw) == 0 {
		return -1
	}
	return gw[n.rng.Intn(len(gw))]
}

// Inject runs the named fault and waits for a leader again.
func (n *Nemesis) Inject(ctx context.Context, name string) error {
	f, ok := Faults[name]
	if !ok {
		f, ok = GatewayFaults[name]
	}
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

// client picks a path to etcd to fault, a client's acting on a grant if
// there is one (a fault on an idle client tests little): an in-process
// client's proxies, or for a client through the gateway, those of the
// replica it is using (every client of that replica shares the fault).
func (n *Nemesis) client() *embedtest.ClientProxy {
	w := n.Workload
	i := -1
	if h := w.Holding(); len(h) > 0 {
		i = h[n.rng.Intn(len(h))]
		n.logf("faulting client %d's path to etcd (holding: %v)", i, h)
	} else {
		i = n.rng.Intn(w.Clients + w.GatewayClients)
	}
	if w.Gatewayed(i) {
		return w.Gateway.Replica(w.Gateway.ReplicaOf(w.Hop(i))).EtcdProxy()
	}
	return w.Proxy(i)
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
