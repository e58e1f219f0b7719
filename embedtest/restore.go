package embedtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// SaveSnapshot saves a snapshot of the cluster's keyspace to path through
// etcd's own code (etcdutl's snapshot manager, what `etcdutl snapshot save`
// and `etcdctl snapshot save` run), from the first running member.
func (c *Cluster) SaveSnapshot(ctx context.Context, path string) error {
	for _, m := range c.members {
		if !m.Running() {
			continue
		}
		cfg := clientv3.Config{Endpoints: []string{m.ClientURL()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
		_, err := snapshot.NewV3(zap.NewNop()).Save(ctx, cfg, path)
		return err
	}
	return fmt.Errorf("embedtest: no running member to snapshot")
}

// restoreOptions are etcdutl snapshot restore's options that matter to a
// keyspace, set by WithRevisionBump, WithMarkCompacted and WithRestoreAs;
// only Restore reads them.
type restoreOptions struct {
	RevisionBump  uint64
	MarkCompacted bool
	As            *Member
}

// WithRevisionBump is etcdutl's --bump-revision: the restored revision is
// the snapshot's plus n. etcdutl applies a bump only together with
// WithMarkCompacted (its command line refuses one without the other; its
// library ignores the bump). Only Restore reads it.
func WithRevisionBump(n uint64) Option {
	return func(c *config) error { c.restore.RevisionBump = n; return nil }
}

// WithMarkCompacted is etcdutl's --mark-compacted: the restored store is
// compacted at its revision, so watches from before it fail. Only Restore
// reads it.
func WithMarkCompacted() Option {
	return func(c *config) error { c.restore.MarkCompacted = true; return nil }
}

// WithRestoreAs restores into the identity of a member of the snapshotted
// cluster (same name, peer URL and cluster token, so the same cluster ID;
// the same client address, so its clients reconnect to the restored
// member), as an operator restoring in place does. That member must be
// stopped. Without it Restore makes a new single-member cluster with a new
// token, so a new cluster ID. Only Restore reads it.
func WithRestoreAs(m *Member) Option {
	return func(c *config) error {
		if m == nil {
			return fmt.Errorf("embedtest: WithRestoreAs(nil)")
		}
		c.restore.As = m
		return nil
	}
}

// Restore restores snapshot into a new single-member cluster under dir
// through etcd's own code (etcdutl snapshot restore) and starts it. The
// caller must Close it. opts configure the member as for Start.
func Restore(dir, snapshotPath string, opts ...Option) (*Cluster, error) {
	cfg := config{size: 1, tickMs: tickMs, electionMs: electionMs, logger: zap.NewNop()}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	ro := cfg.restore
	if ro.As != nil {
		return restore(dir, snapshotPath, ro, cfg) // its addresses are the old member's: nothing to pick again
	}
	return retryAddrInUse(dir, func(dir string) (*Cluster, error) { return restore(dir, snapshotPath, ro, cfg) })
}

func restore(dir, snapshotPath string, ro restoreOptions, cfg config) (*Cluster, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	m := &Member{
		name:      "restored",
		dir:       filepath.Join(dir, "restored"),
		clientURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cport)},
		peerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pport)},
		token:     fmt.Sprintf("embedtest-restored-%d", time.Now().UnixNano()),
		logger:    cfg.logger,
		tickMs:    cfg.tickMs,
		election:  cfg.electionMs,
		quota:     cfg.quotaBytes,
	}
	if ro.As != nil {
		if ro.As.Running() {
			return nil, fmt.Errorf("embedtest: restore as member %s: it is running", ro.As.name)
		}
		// Listen where the old member listened, so that its client proxy,
		// and every client of the old cluster, reach the restored member.
		m.clientURL = ro.As.listenClient
	}
	c := &Cluster{cfg: cfg, members: []*Member{m}}
	if err := c.addProxies(m); err != nil {
		c.Close()
		return nil, err
	}
	if ro.As != nil {
		// The same name, advertised peer URL and token make the same member
		// and cluster IDs; a single member never dials its peer URL.
		m.name, m.peerURL, m.token = ro.As.name, ro.As.peerURL, ro.As.token
	}
	m.initial = m.name + "=" + m.peerURL.String()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.Close()
		return nil, err
	}
	err = snapshot.NewV3(cfg.logger).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snapshotPath,
		Name:                m.name,
		OutputDataDir:       m.dir,
		PeerURLs:            []string{m.peerURL.String()},
		InitialCluster:      m.initial,
		InitialClusterToken: m.token,
		RevisionBump:        ro.RevisionBump,
		MarkCompacted:       ro.MarkCompacted,
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("embedtest: restore %s: %w", snapshotPath, err)
	}
	if err := m.start(embed.ClusterStateFlagNew); err != nil {
		c.Close()
		return nil, err
	}
	if ro.As != nil {
		ro.As.front.setDown(false) // the old member's clients reach the restored one
	}
	return c, nil
}

// NewRestoredCluster is Restore for a test: data in t.TempDir(), teardown
// in t.Cleanup.
func NewRestoredCluster(t testing.TB, snapshotPath string, opts ...Option) *Cluster {
	t.Helper()
	c, err := Restore(t.TempDir(), snapshotPath, opts...)
	if err != nil {
		t.Fatalf("embedtest: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
