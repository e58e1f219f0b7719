package drill

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
)

// FixtureResult is one seed-000 stale-owner fixture: what the authority
// should answer, what it did, and whether a refusal left the keyspace
// untouched.
type FixtureResult struct {
	Name     string                  `json:"name"`
	Expected coordinator.Disposition `json:"expected"`
	Observed coordinator.Disposition `json:"observed"`
	Pass     bool                    `json:"pass"`
	// Detail says what was seen (the error, or a keyspace change).
	Detail string `json:"-"`
}

// fixtureRunner runs the fixtures in order on real etcd; they share state,
// as the seed's fixture does.
type fixtureRunner struct {
	ctx     context.Context
	client  *clientv3.Client
	c       *coordinator.Coordinator
	prefix  string
	results []FixtureResult
	lg      *zap.Logger
	opts    []coordinator.Option // each coordinator's on client (runFixtures)
}

// Fixture tenant and task.
const (
	fixtureTenant = "tenant-a"
	fixtureTask   = "task-a"
)

// runFixtures runs the seed-000 negatives under prefix (and prefix +
// "-other-realm" for the other-realm fixture) and returns their results in
// order, with opts for each coordinator on client (Run's
// WithClientConfig). An error means a fixture could not be set up (etcd
// unreachable, say): the fixtures did not run, which is not a pass.
func runFixtures(ctx context.Context, client *clientv3.Client, prefix string, lg *zap.Logger, opts ...coordinator.Option) ([]FixtureResult, error) {
	c, err := coordinator.New(ctx, client, append([]coordinator.Option{coordinator.WithPrefix(prefix), coordinator.WithLogger(lg)}, opts...)...)
	if err != nil {
		return nil, err
	}
	f := &fixtureRunner{ctx: ctx, client: client, c: c, prefix: prefix, lg: lg, opts: opts}
	if err := f.run(); err != nil {
		return f.results, err
	}
	return f.results, nil
}

func (f *fixtureRunner) session(owner string) (*coordinator.Session, error) {
	return f.c.NewSession(f.ctx, owner, sessionTTL, coordinator.WithoutKeepAlive())
}

func (f *fixtureRunner) claim(owner string) (coordinator.Grant, *coordinator.Session, error) {
	s, err := f.session(owner)
	if err != nil {
		return coordinator.Grant{}, nil, err
	}
	g, err := s.Claim(f.ctx, fixtureTenant, fixtureTask)
	return g, s, err
}

// snapshot is every key and value under the fixture prefix.
func (f *fixtureRunner) snapshot() ([]string, error) {
	resp, err := f.client.Get(f.ctx, f.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, fmt.Sprintf("%s=%s@%d", kv.Key, kv.Value, kv.ModRevision))
	}
	return out, nil
}

// check runs one fixture: act returns the disposition it observed (and
// the error, if any); a refusal must leave the keyspace as it was.
func (f *fixtureRunner) check(name string, expected coordinator.Disposition, act func() (coordinator.Disposition, error)) error {
	before, err := f.snapshot()
	if err != nil {
		return err
	}
	observed, actErr := act()
	r := FixtureResult{Name: name, Expected: expected, Observed: observed, Pass: observed == expected}
	if actErr != nil {
		r.Detail = actErr.Error()
	}
	if expected.Class() != coordinator.ClassDone {
		after, err := f.snapshot()
		if err != nil {
			return err
		}
		if !slices.Equal(before, after) {
			r.Pass = false
			r.Detail += "; the keyspace changed"
		}
	}
	f.results = append(f.results, r)
	return nil
}

// commit is a fenced commit's disposition: the receipt's when it succeeded.
func commit(ctx context.Context, c *coordinator.Coordinator, g coordinator.Grant, in fencedtxn.Intent) (coordinator.Disposition, error) {
	r, err := fencedtxn.Commit(ctx, c, g, in)
	if err != nil {
		return coordinator.DispositionOf(err), err
	}
	return r.Disposition, nil
}

func (f *fixtureRunner) run() error {
	intent := fencedtxn.Intent{Tenant: fixtureTenant, Task: fixtureTask, Operation: "operation-a", Value: []byte("synthetic-value")}
	try := func(g coordinator.Grant, in fencedtxn.Intent) func() (coordinator.Disposition, error) {
		return func() (coordinator.Disposition, error) { return commit(f.ctx, f.c, g, in) }
	}
	// region-a claims and is forced to expire (its lease revoked: etcd
	// deletes its owner key, as on expiry) before anybody claims again.
	old, sa, err := f.claim("region-a")
	if err != nil {
		return err
	}
	defer f.close(sa)
	if err := f.c.RevokeLease(f.ctx, old.Lease); err != nil {
		return err
	}
	if err := f.check("expired owner before regrant", coordinator.ExpiredOwner, try(old, intent)); err != nil {
		return err
	}

	current, sb, err := f.claim("region-b")
	if err != nil {
		return err
	}
	defer f.close(sb)
	if err := f.check("old owner after regrant before the new owner's first write", coordinator.StaleOwner, try(old, intent)); err != nil {
		return err
	}
	impostor := current
	impostor.Owner = "another-owner"
	if err := f.check("equal-epoch impostor", coordinator.StaleOwner, try(impostor, intent)); err != nil {
		return err
	}
	if err := f.check("current owner commits", coordinator.Committed, try(current, intent)); err != nil {
		return err
	}

	// region-b prepares its next write and waits; meanwhile its lease is
	// lost and region-c takes over; region-b's write arrives after.
	next := fencedtxn.Intent{Tenant: fixtureTenant, Task: fixtureTask, Operation: "operation-b", Value: []byte("synthetic-next"), ExpectedVersion: 1}
	if err := f.c.RevokeLease(f.ctx, current.Lease); err != nil {
		return err
	}
	latest, sc, err := f.claim("region-c")
	if err != nil {
		return err
	}
	defer f.close(sc)
	if err := f.check("held owner after a wait", coordinator.StaleOwner, try(current, next)); err != nil {
		return err
	}
	if err := f.check("exact-operation recovery by the new owner", coordinator.HistoricalRetry, try(latest, intent)); err != nil {
		return err
	}
	changed := intent
	changed.Value = []byte("different-value")
	if err := f.check("operation conflict", coordinator.OperationConflict, try(latest, changed)); err != nil {
		return err
	}
	stale := fencedtxn.Intent{Tenant: fixtureTenant, Task: fixtureTask, Operation: "operation-c", Value: []byte("v"), ExpectedVersion: 0}
	if err := f.check("version conflict", coordinator.VersionConflict, try(latest, stale)); err != nil {
		return err
	}
	cross := intent
	cross.Task = "other-task"
	if err := f.check("scope mismatch", coordinator.ScopeMismatch, try(latest, cross)); err != nil {
		return err
	}

	other, err := coordinator.New(f.ctx, f.client, append([]coordinator.Option{coordinator.WithPrefix(f.prefix + "-other-realm"), coordinator.WithLogger(f.lg)}, f.opts...)...)
	if err != nil {
		return err
	}
	if err := f.check("other realm", coordinator.GenerationMismatch, func() (coordinator.Disposition, error) {
		return commit(f.ctx, other, latest, intent)
	}); err != nil {
		return err
	}
	return f.check("unavailable authority", coordinator.AuthorityUnavailable, func() (coordinator.Disposition, error) {
		return f.unavailable(latest, next)
	})
}

// unavailable commits through a client pointed at a closed loopback port:
// the request never leaves the process, so it is a hold.
func (f *fixtureRunner) unavailable(g coordinator.Grant, in fencedtxn.Intent) (coordinator.Disposition, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	_ = l.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: time.Second,
		DialOptions: coordinator.DialOptions(), Logger: zap.NewNop()})
	if err != nil {
		return coordinator.AuthorityUnavailable, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(f.ctx, 2*time.Second)
	defer cancel()
	c, err := coordinator.New(ctx, cli, coordinator.WithPrefix(f.prefix))
	if err != nil {
		return coordinator.DispositionOf(err), err
	}
	return commit(ctx, c, g, in)
}

func (f *fixtureRunner) close(s *coordinator.Session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), 5*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}
