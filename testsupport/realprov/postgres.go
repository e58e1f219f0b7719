package realprov

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGUser is the least-privileged role the harness creates for adapters: it
// may read the topology (pg_monitor) and call pg_promote, nothing else.
const PGUser = "leasegate"

// PGPair is a PostgreSQL primary and a streaming standby of it.
type PGPair struct {
	Primary, Standby *PGNode
	// PasswordFile holds PGUser's password (one line), as an adapter reads
	// its credential.
	PasswordFile string
	// Dir holds both data directories, their logs and the password files.
	Dir string

	acct      account
	superPass string
}

// PGNode is one PostgreSQL server of a pair.
type PGNode struct {
	Name string // "db-a" (the first primary) or "db-b"
	Port int
	Data string // its data directory
	Log  string // its server log (every statement, with application_name)

	pair *PGPair
	server
}

// NewPGPair starts a pair for t, skipping t (SkipLine) when PostgreSQL is
// not installed, and stops it in t.Cleanup, failing t if a server process
// outlives the stop.
func NewPGPair(t testing.TB) *PGPair {
	t.Helper()
	Skip(t, HavePostgres)
	p, err := StartPGPair(context.Background())
	if err != nil {
		t.Fatalf("realprov: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("realprov: %v", err)
		}
	})
	return p
}

// StartPGPair initializes a primary (initdb), starts it on a free loopback
// port, creates PGUser, clones a standby with pg_basebackup -R and starts
// it, and returns once the standby streams from the primary. The caller
// must Close it.
func StartPGPair(ctx context.Context) (_ *PGPair, err error) {
	if err := HavePostgres(); err != nil {
		return nil, err
	}
	acct, err := serverAccount("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "leasegate-pg-")
	if err != nil {
		return nil, err
	}
	p := &PGPair{Dir: dir, acct: acct, superPass: secret(), PasswordFile: filepath.Join(dir, "leasegate.password")}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()
	if err := acct.mkdir(dir); err != nil {
		return nil, err
	}
	superFile := filepath.Join(dir, "postgres.password")
	if err := acct.writeFile(superFile, []byte(p.superPass+"\n")); err != nil {
		return nil, err
	}
	p.Primary = &PGNode{Name: "db-a", Data: filepath.Join(dir, "db-a"), Log: filepath.Join(dir, "db-a.log"), pair: p, server: server{name: "db-a"}}
	p.Standby = &PGNode{Name: "db-b", Data: filepath.Join(dir, "db-b"), Log: filepath.Join(dir, "db-b.log"), pair: p, server: server{name: "db-b"}}
	if err := acct.run(pgBin("initdb"), "-D", p.Primary.Data, "-U", "postgres", "--pwfile", superFile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		return nil, err
	}
	if err := p.Primary.Start(ctx); err != nil {
		return nil, err
	}
	if err := p.createUser(ctx); err != nil {
		return nil, err
	}
	bb := acct.command(pgBin("pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(p.Primary.Port), "-U", "postgres",
		"-D", p.Standby.Data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	bb.Env = append(bb.Env, "PGPASSWORD="+p.superPass)
	if out, err := bb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("realprov: pg_basebackup: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := p.Standby.Start(ctx); err != nil {
		return nil, err
	}
	if err := p.waitStreaming(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *PGPair) createUser(ctx context.Context) error {
	pass := secret()
	if err := os.WriteFile(p.PasswordFile, []byte(pass+"\n"), 0o600); err != nil {
		return err
	}
	conn, err := p.Primary.Admin(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE pg_monitor", PGUser, pass),
		"GRANT EXECUTE ON FUNCTION pg_promote(boolean, integer) TO " + PGUser,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("realprov: %s: %w", strings.SplitN(q, " PASSWORD", 2)[0], err)
		}
	}
	return nil
}

// waitStreaming waits until the standby's WAL receiver streams.
func (p *PGPair) waitStreaming(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		status, err := p.Standby.queryString(ctx, "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'none')")
		if err == nil && status == "streaming" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realprov: standby not streaming (last: %q, %v); see %s", status, err, p.Standby.Log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Nodes are the primary and the standby, in that order.
func (p *PGPair) Nodes() []*PGNode { return []*PGNode{p.Primary, p.Standby} }

// Close stops both servers and removes the directory. It fails if a
// server process is still running afterwards.
func (p *PGPair) Close() error {
	var errs []error
	for _, n := range []*PGNode{p.Standby, p.Primary} {
		if n != nil {
			errs = append(errs, n.Stop())
		}
	}
	if pids := ProcessesIn(p.Dir); len(pids) > 0 {
		errs = append(errs, fmt.Errorf("realprov: processes still running in %s after Close: %v", p.Dir, pids))
	}
	errs = append(errs, os.RemoveAll(p.Dir))
	return errors.Join(errs...)
}

// ConnString is how PGUser reaches the node over TCP (without its
// password, which a client reads from PasswordFile).
func (n *PGNode) ConnString() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d dbname=postgres user=%s sslmode=disable connect_timeout=5", n.Port, PGUser)
}

// Admin is a superuser connection to the node, for the harness and tests
// (an operator's session). The caller closes it.
func (n *PGNode) Admin(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d dbname=postgres user=postgres sslmode=disable connect_timeout=5", n.Port))
	if err != nil {
		return nil, err
	}
	cfg.Password = n.pair.superPass
	return pgx.ConnectConfig(ctx, cfg)
}

func (n *PGNode) queryString(ctx context.Context, q string) (string, error) {
	conn, err := n.Admin(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s string
	err = conn.QueryRow(ctx, q).Scan(&s)
	return s, err
}

// InRecovery reports pg_is_in_recovery() on the node (true: a standby).
func (n *PGNode) InRecovery(ctx context.Context) (bool, error) {
	s, err := n.queryString(ctx, "SELECT pg_is_in_recovery()::text")
	return s == "true", err
}

// Promote promotes the node by hand, as an operator would (pg_promote,
// waiting for it to finish).
func (n *PGNode) Promote(ctx context.Context) error {
	s, err := n.queryString(ctx, "SELECT pg_promote(true, 60)::text")
	if err == nil && s != "true" {
		err = fmt.Errorf("realprov: pg_promote on %s returned %s", n.Name, s)
	}
	return err
}

// Start starts the server (again: same data, a port picked free the first
// time and kept after) and waits until it accepts connections.
func (n *PGNode) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && !n.proc.exited() {
		return fmt.Errorf("realprov: %s is running", n.Name)
	}
	keep := n.Port != 0
	var lastErr error
	for range 5 {
		if !keep {
			port, err := freePort()
			if err != nil {
				return err
			}
			n.Port = port
		}
		err := n.startOnce(ctx)
		if err == nil {
			return nil
		}
		lastErr = err
		if keep || !strings.Contains(readTail(n.Log), "already in use") {
			break
		}
	}
	return lastErr
}

func (n *PGNode) startOnce(ctx context.Context) error {
	a := n.pair.acct
	cmd := a.command(pgBin("postgres"), "-D", n.Data, "-p", strconv.Itoa(n.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+n.pair.Dir,
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=30", "-c", "max_wal_senders=5",
		"-c", "wal_keep_size=64MB", "-c", "hot_standby=on", "-c", "wal_receiver_status_interval=1s",
		"-c", "logging_collector=off", "-c", "log_statement=all", "-c", "log_line_prefix=%m [%p] app=%a ")
	cmd.Dir = n.Data
	proc, err := startProcess(cmd, n.Log)
	if err != nil {
		return err
	}
	n.proc = proc
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		if _, err := n.queryString(ctx, "SELECT 'ready'"); err == nil {
			return nil
		}
		select {
		case <-proc.done:
			return fmt.Errorf("realprov: %s exited at start (%v): %s", n.Name, proc.err, readTail(n.Log))
		case <-ctx.Done():
			_ = proc.stop(syscall.SIGQUIT, 5*time.Second)
			return fmt.Errorf("realprov: %s not ready: %s", n.Name, readTail(n.Log))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop shuts the server down (fast shutdown: SIGINT) and waits for it.
func (n *PGNode) Stop() error { return n.stopWith(syscall.SIGINT, 30*time.Second) }

// Crash stops the server at once (immediate shutdown: SIGQUIT), as a
// crash would leave it; Start recovers it.
func (n *PGNode) Crash() error { return n.stopWith(syscall.SIGQUIT, 30*time.Second) }

// Statements are the statements containing substr that the server logged
// (log_statement=all), each prefixed by the client's application_name
// ("app=…"): the server's own record of who sent what.
func (n *PGNode) Statements(substr string) []string {
	b, _ := os.ReadFile(n.Log)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "statement:") && strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// readTail is the last lines of a log, for an error message.
func readTail(path string) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > 800 {
		s = "…" + s[len(s)-800:]
	}
	return s
}

// secret is a random credential for one harness start.
func secret() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
