// Package lgtest holds test helpers shared by leasegate's packages: a
// coordinator on an embedded cluster, waiting for an owner key to go, and a
// byte-for-byte snapshot of the keyspace.
package lgtest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/connectivity"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
)

// Timeout bounds every wait of a test on etcd.
const Timeout = 30 * time.Second

// Ctx is a context bounded by Timeout and cancelled at the end of the test.
func Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Coordinator starts a coordinator on cl with a fresh client.
func Coordinator(t testing.TB, cl *embedtest.Cluster, opts ...coordinator.Option) *coordinator.Coordinator {
	t.Helper()
	c, err := coordinator.New(Ctx(t), cl.Client(t), opts...)
	if err != nil {
		t.Fatalf("coordinator.New: %v", err)
	}
	return c
}

// Session starts a session and closes it at the end of the test.
func Session(t testing.TB, c *coordinator.Coordinator, owner string, ttl time.Duration, opts ...coordinator.SessionOption) *coordinator.Session {
	t.Helper()
	s, err := c.NewSession(Ctx(t), owner, ttl, opts...)
	if err != nil {
		t.Fatalf("NewSession(%s): %v", owner, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// Claim claims and fails the test unless granted.
func Claim(t testing.TB, s *coordinator.Session, tenant, task string) coordinator.Grant {
	t.Helper()
	g, err := s.Claim(Ctx(t), tenant, task)
	if err != nil {
		t.Fatalf("Claim(%s/%s) by %s: %v", tenant, task, s.Owner(), err)
	}
	return g
}

// WaitOwnerGone waits, on a watch, until the task's owner key is deleted
// (lease expiry, revocation, release) — no sleeping.
func WaitOwnerGone(t testing.TB, c *coordinator.Coordinator, tenant, task string) {
	t.Helper()
	ctx := Ctx(t)
	key := c.Keys().Owner(tenant, task)
	resp, err := c.Client().Get(ctx, key)
	if err != nil {
		t.Fatalf("get owner key: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return
	}
	wch := c.Client().Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut())
	for wr := range wch {
		if wr.Err() != nil {
			t.Fatalf("watch owner key: %v", wr.Err())
		}
		if len(wr.Events) > 0 {
			return
		}
	}
	t.Fatalf("owner key %s still present: %v", key, ctx.Err())
}

// Snapshot is every key and value under a prefix, with revisions left out
// (a refused or invalid request must leave it byte-for-byte unchanged).
type Snapshot []string

// Snap reads a snapshot of every key under prefix.
func Snap(t testing.TB, cli *clientv3.Client, prefix string) Snapshot {
	t.Helper()
	resp, err := cli.Get(Ctx(t), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var s Snapshot
	for _, kv := range resp.Kvs {
		s = append(s, fmt.Sprintf("%q=%q lease=%d version=%d mod=%d", kv.Key, kv.Value, kv.Lease, kv.Version, kv.ModRevision))
	}
	return s
}

// Diff describes how b differs from a, or "" if it does not.
func (a Snapshot) Diff(b Snapshot) string {
	var out bytes.Buffer
	seen := map[string]bool{}
	for _, x := range a {
		seen[x] = true
	}
	for _, y := range b {
		if !seen[y] {
			fmt.Fprintf(&out, "+ %s\n", y)
		}
		delete(seen, y)
	}
	for _, x := range a {
		if seen[x] {
			fmt.Fprintf(&out, "- %s\n", x)
		}
	}
	return out.String()
}

// WaitDisconnected waits until cli's connection has left the Ready state
// (after the members it talks to were stopped), so that a request sent next
// cannot ride an old connection.
func WaitDisconnected(t testing.TB, cli *clientv3.Client) {
	t.Helper()
	ctx := Ctx(t)
	conn := cli.ActiveConnection()
	for {
		s := conn.GetState()
		if s != connectivity.Ready {
			return
		}
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("client still connected: %v", ctx.Err())
		}
	}
}

// RefusedWritingNothing runs f, which must fail with want, and fails t if
// anything under prefix changed meanwhile: a refusal writes nothing.
func RefusedWritingNothing(t testing.TB, cli *clientv3.Client, prefix string, want coordinator.Disposition, f func() error) {
	t.Helper()
	WritesNothing(t, cli, prefix, fmt.Sprintf("refused with %s", want), func() { Want(t, f(), want) })
}

// WritesNothing runs f, a block of calls each checked by f itself (several
// refusals, a read), and fails t if anything under prefix changed
// meanwhile; what names the block in the failure.
func WritesNothing(t testing.TB, cli *clientv3.Client, prefix, what string, f func()) {
	t.Helper()
	before := Snap(t, cli, prefix)
	f()
	if d := before.Diff(Snap(t, cli, prefix)); d != "" {
		t.Fatalf("%s, yet it wrote:\n%s", what, d)
	}
}

// Want fails the test unless err's disposition is want.
func Want(t testing.TB, err error, want coordinator.Disposition) {
	t.Helper()
	if got := coordinator.DispositionOf(err); got != want {
		t.Fatalf("disposition %q, want %q (err: %v)", got, want, err)
	}
}

// LeakOptions are the goleak options of every package's TestMain. They
// ignore only net/http connection goroutines that embedded etcd members'
// peer (rafthttp) transports leave behind for a moment after Close; leasegate
// itself uses no net/http.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	}
}

// CoordinatorOf starts a coordinator on an existing client.
func CoordinatorOf(t testing.TB, cli *clientv3.Client, opts ...coordinator.Option) *coordinator.Coordinator {
	t.Helper()
	c, err := coordinator.New(Ctx(t), cli, opts...)
	if err != nil {
		t.Fatalf("coordinator.New: %v", err)
	}
	return c
}

// MemberClient is a client of member i alone (with coordinator.DialOptions),
// closed at the end of the test: it cannot fail over to another member.
func MemberClient(t testing.TB, cl *embedtest.Cluster, i int) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cl.Member(i).ClientURL()}, DialTimeout: 5 * time.Second,
		DialOptions: coordinator.DialOptions(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client of member %d: %v", i, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Logs are the entries of an observed logger (zaptest/observer's), which a
// test waits for by what an entry carries — its fields, its level —
// rather than by its wording, so that rewording a log line breaks no test.
type Logs struct {
	*observer.ObservedLogs
	mu    sync.Mutex
	wrote chan struct{} // closed, and replaced, at every entry
}

// Observed is a logger at debug level whose entries are observed.
func Observed() (*zap.Logger, *Logs) {
	obs, ol := observer.New(zapcore.DebugLevel)
	l := &Logs{ObservedLogs: ol, wrote: make(chan struct{})}
	return zap.New(zapcore.NewTee(obs, &wakeCore{LevelEnabler: zapcore.DebugLevel, l: l})), l
}

// WaitFor returns the first entry match accepts, waiting for it up to
// Timeout (what names it in the failure).
func (l *Logs) WaitFor(t testing.TB, what string, match func(observer.LoggedEntry) bool) observer.LoggedEntry {
	t.Helper()
	timeout := time.NewTimer(Timeout)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		wrote := l.wrote // taken before the look, so an entry logged after it wakes the wait
		l.mu.Unlock()
		for _, e := range l.All() {
			if match(e) {
				return e
			}
		}
		select {
		case <-wrote:
		case <-timeout.C:
			t.Fatalf("timed out waiting for %s to be logged", what)
		}
	}
}

// Field accepts an entry whose field key has value.
func Field(key string, value any) func(observer.LoggedEntry) bool {
	return func(e observer.LoggedEntry) bool {
		v, ok := e.ContextMap()[key]
		return ok && v == value
	}
}

// wakeCore wakes the waits of l at every entry.
type wakeCore struct {
	zapcore.LevelEnabler
	l *Logs
}

func (c *wakeCore) With([]zapcore.Field) zapcore.Core { return c }
func (c *wakeCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (c *wakeCore) Write(zapcore.Entry, []zapcore.Field) error {
	c.l.mu.Lock()
	close(c.l.wrote)
	c.l.wrote = make(chan struct{})
	c.l.mu.Unlock()
	return nil
}
func (c *wakeCore) Sync() error { return nil }

// Wait fails the test unless ch is closed (or sends) within Timeout.
func Wait[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Timeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Cond is one condition of a compound check: what it says, and whether it
// holds.
type Cond struct {
	what string
	ok   bool
}

// Is is the condition what, holding when ok.
func Is(what string, ok bool) Cond { return Cond{what, ok} }

// Holds fails t unless every condition holds, naming those that do not
// after what (the value checked), so a compound check says which failed.
func Holds(t testing.TB, what string, conds ...Cond) {
	t.Helper()
	var failed []string
	for _, c := range conds {
		if !c.ok {
			failed = append(failed, c.what)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%s: want %s", what, strings.Join(failed, "; "))
	}
}
