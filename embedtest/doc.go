// Package embedtest runs real etcd members in-process, on 127.0.0.1, for
// tests, drills and users' own integration runs: one or several members,
// fast ticks (so etcd's minimum lease TTL is one second), and faults —
// members halted, killed and restarted, partitioned from their peers,
// clients cut off, stalled or deprived of their answers.
//
// # A three-member cluster in a test
//
// The runnable version, without testing.TB, is Example.
//
//	cl := embedtest.NewCluster(t, embedtest.WithSize(3)) // data in t.TempDir(), closed in t.Cleanup
//	cli := cl.Client(t)                                  // a client of every member
//	lead := cl.WaitLeader(t)
//	err := cl.Member(lead).Kill()                        // hard stop: no leadership transfer
//	next, err := cl.Leader(ctx)                          // the others elect
//	err = cl.Member(lead).Start()                        // same addresses, same data
//
//	cl.Partition(next)                                   // cut from its peers, both ways
//	leader, err := cl.LeaderAmong(ctx, others...)        // the majority's side
//	cl.Heal()
//
//	cp := cl.ClientProxy(t)                              // one client's own path to the cluster
//	worker := cp.Client(t)
//	cp.Blackhole()                                       // its keepalives are lost; its process lives
//
// Programs that have no testing.TB use the forms that return errors:
// Start (a cluster), Close, Cluster.Leader, Member.Halt, Member.Kill,
// Member.Start, Cluster.NewClient, Cluster.NewClientProxy.
//
// Every member has two proxies in front of it (Proxy, plain TCP relays):
// clients dial the one in front of its client port, and peers the one in
// front of its peer port; etcd advertises the proxies' addresses and
// listens behind them. Stopping a member closes every connection through
// its proxies at once, so a stop is as fast as a process exit rather than
// etcd's drain of open streams (about 6 s), and a peer fault can be set per
// pair of members: the peer proxy tells the sending member by the
// X-Server-From header etcd's raft transport sends.
//
// # Secured clusters
//
// WithTLS serves clients and peers over TLS only, with a CA, a member
// certificate and a client certificate generated for the cluster at start
// (TLSFiles names the PEM files: what --cacert, --cert and --key take);
// WithAuth creates a root user and turns etcd's authentication on. The
// cluster's own clients (Client, NewClient) use both; ClientAs logs in as
// another user, and AddPrefixUser creates one whose role has readwrite on
// one prefix only (secure.go).
//
// # Guarantees
//
// Every member is a real etcd server (go.etcd.io/etcd/server/v3 embed) with
// real raft, a real lessor and real lease expiry. Halt hands a leader's
// leadership to a running member before stopping; Kill stops raft with no
// transfer, so the followers must time out and elect. Client ports are
// picked by the OS at bind time; peer ports, which a multi-member cluster
// must know before it starts, are picked by the OS and the start is retried
// with fresh ports if one was taken meanwhile.
//
// # Non-guarantees
//
// fsync is off unless WithFsync (UnsafeNoFsync), so a killed test process
// loses recent writes; members share one process, so a stopped member is a
// closed server, not a paused one (freeze a real process with SIGSTOP for
// that).
// A partition cuts raft traffic (identified by X-Server-From); etcd's other
// peer requests (a follower forwarding a lease keepalive to the leader,
// version probes) name no sender and pass a partition between two running
// members, until the isolated member notices it has no leader (one election
// timeout). Peer faults need plain-HTTP peer traffic: with peer TLS the
// proxy cannot read the sender, and only whole-member faults apply.
package embedtest
