package pgpromote

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasegate/leasegate/adapters/internal/config"
)

// NodeState is one node as its own server reports it.
type NodeState struct {
	Name string `json:"name"`
	// Reachable: the node answered. An unreachable node's other fields
	// are unknown (zero).
	Reachable  bool   `json:"reachable"`
	InRecovery bool   `json:"in_recovery"` // pg_is_in_recovery(): a standby
	Timeline   int64  `json:"timeline"`    // the node's current timeline
	SystemID   string `json:"system_id"`   // pg_control_system().system_identifier
	LSN        string `json:"lsn,omitempty"`
	StartedAt  string `json:"started_at,omitempty"` // pg_postmaster_start_time()
	Error      string `json:"error,omitempty"`
}

// Role is "writer", "standby" or "unreachable".
func (n NodeState) Role() string {
	switch {
	case !n.Reachable:
		return "unreachable"
	case n.InRecovery:
		return "standby"
	}
	return "writer"
}

// Topology is every configured node's state, in configuration order.
type Topology struct {
	Nodes []NodeState `json:"nodes"`
	At    time.Time   `json:"at"`
}

// Node is the named node's state (ok false if it is not configured).
func (t Topology) Node(name string) (NodeState, bool) {
	for _, n := range t.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodeState{}, false
}

// Writers are the names of the nodes that are out of recovery.
func (t Topology) Writers() []string {
	var out []string
	for _, n := range t.Nodes {
		if n.Role() == "writer" {
			out = append(out, n.Name)
		}
	}
	return out
}

// Digest is what a promotion depends on: each node's role, timeline and
// system identifier. LSNs, start times and errors stay out of it (they
// move without the topology changing), so two reads of one topology give
// one digest.
func (t Topology) Digest() string {
	parts := make([]string, 0, len(t.Nodes))
	for _, n := range t.Nodes {
		if !n.Reachable {
			parts = append(parts, n.Name+"=unreachable")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s/tl%d/sys%s", n.Name, n.Role(), n.Timeline, n.SystemID))
	}
	sort.Strings(parts)
	return "pg-topology-v1;" + strings.Join(parts, ";")
}

func (t Topology) detail() json.RawMessage {
	b, _ := json.Marshal(t)
	return b
}

// nodeQuery reads one node's topology facts in one statement. On a
// standby the timeline is the last restartpoint's (pg_control_checkpoint);
// on a writer it is the timeline of the WAL being written (its checkpoint
// lags a promotion until the next checkpoint).
const nodeQuery = `SELECT pg_is_in_recovery(),
	CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::bigint
	     ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END,
	(SELECT system_identifier FROM pg_control_system())::text,
	CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END::text,
	pg_postmaster_start_time()::text`

func (a *Adapter) readNode(ctx context.Context, n Node) NodeState {
	st := NodeState{Name: n.Name}
	conn, err := a.connect(ctx, n, "")
	if err != nil {
		st.Error = err.Error()
		return st
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var lsn *string
	if err := conn.QueryRow(ctx, nodeQuery).Scan(&st.InRecovery, &st.Timeline, &st.SystemID, &lsn, &st.StartedAt); err != nil {
		return NodeState{Name: n.Name, Error: err.Error()}
	}
	if lsn != nil {
		st.LSN = *lsn
	}
	st.Reachable = true
	return st
}

// Topology reads every node, concurrently, each from its own server.
func (a *Adapter) Topology(ctx context.Context) Topology {
	out := make([]NodeState, len(a.nodes))
	done := make(chan struct{})
	for i, n := range a.nodes {
		go func() {
			out[i] = a.readNode(ctx, n)
			done <- struct{}{}
		}()
	}
	for range a.nodes {
		<-done
	}
	return Topology{Nodes: out, At: a.now().UTC()}
}

// connect opens a connection to n as the configured role, with the
// password read from its file now (so a rotated file takes effect), in the
// simple query protocol: a statement travels in one message, so a cut
// connection either delivered all of it or none.
func (a *Adapter) connect(ctx context.Context, n Node, appName string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(n.ConnString)
	if err != nil {
		return nil, err
	}
	pass, err := config.ReadSecret("password file", a.passwordFile)
	if err != nil {
		return nil, err
	}
	cfg.Password = pass
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.ConnectTimeout = a.dialTimeout
	if appName != "" {
		cfg.RuntimeParams["application_name"] = appName
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// Probe reads the topology and reports whether every node answered, as
// the configured role with the password file's password: nil, or an error
// naming each node that did not and why. It changes nothing. `leasegate
// serve` shows it as the adapter's health; a node down is also what a
// failover looks like, so it does not stop a dispatch (Precondition
// decides that, per effect).
func (a *Adapter) Probe(ctx context.Context) error {
	var bad []string
	for _, n := range a.Topology(ctx).Nodes {
		if !n.Reachable {
			bad = append(bad, n.Name+": "+strings.Join(strings.Fields(n.Error), " ")) // one line
		}
	}
	if bad != nil {
		return fmt.Errorf("pgpromote: %s", strings.Join(bad, "; "))
	}
	return nil
}
