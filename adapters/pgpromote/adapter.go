package pgpromote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasegate/leasegate/adapters/internal/config"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// Kind is the effect kind the adapter serves by default.
const Kind = "db.promote"

// DefaultPromoteWait is how long pg_promote waits for the promotion to
// finish (its wait_seconds) and how long after a dispatch a standby still
// in recovery reads as Pending rather than NotApplied.
const DefaultPromoteWait = 60 * time.Second

// Node is one PostgreSQL server of the topology.
type Node struct {
	// Name is the node's name in effects (Effect.Target) and in the
	// topology digest: a label (coordinator.CheckLabel).
	Name string
	// ConnString is a libpq keyword/value string or URL without a
	// password: host, port, dbname, user. The password is read from the
	// adapter's password file.
	ConnString string
}

// Adapter promotes one standby of a PostgreSQL topology. It is safe for
// concurrent use.
type Adapter struct {
	kind         string
	nodes        []Node
	passwordFile string
	promoteWait  time.Duration
	dialTimeout  time.Duration
	now          func() time.Time
}

// Option configures New.
type Option func(*Adapter) error

// WithKind serves another effect kind than Kind (two topologies, say).
func WithKind(kind string) Option {
	return func(a *Adapter) error {
		if err := coordinator.CheckLabel("kind", kind); err != nil {
			return config.Invalid("pgpromote", "kind", "%v", err)
		}
		a.kind = kind
		return nil
	}
}

// WithPromoteWait sets pg_promote's wait (whole seconds, 1 s to 1 h).
func WithPromoteWait(d time.Duration) Option {
	return func(a *Adapter) error {
		if d < time.Second || d > time.Hour || d%time.Second != 0 {
			return config.Invalid("pgpromote", "promote_wait", "promote wait %v: whole seconds from 1s to 1h", d)
		}
		a.promoteWait = d
		return nil
	}
}

// WithDialTimeout bounds each connection attempt (default 5 s).
func WithDialTimeout(d time.Duration) Option {
	return func(a *Adapter) error {
		if d <= 0 {
			return config.Invalid("pgpromote", "dial_timeout", "dial timeout %v must be positive", d)
		}
		a.dialTimeout = d
		return nil
	}
}

// WithClock sets the clock of observation times (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(a *Adapter) error {
		if now == nil {
			return errors.New("nil clock")
		}
		a.now = now
		return nil
	}
}

// New checks the configuration now — when the ledger (or gateway) starts,
// not at the first dispatch — and returns the adapter: at least two nodes
// with distinct label names, connection strings that parse, name a host
// and carry no password, and a password file that can be read, is private
// to its owner and group, and is not empty. A bad configuration is
// coordinator's invalid_input, naming the setting at fault as `leasegate
// serve`'s configuration does (nodes[i].name, nodes[i].conn,
// password_file). The password is never logged nor kept in an error.
func New(nodes []Node, passwordFile string, opts ...Option) (*Adapter, error) {
	const op = "pgpromote"
	a := &Adapter{kind: Kind, passwordFile: passwordFile, promoteWait: DefaultPromoteWait,
		dialTimeout: 5 * time.Second, now: time.Now}
	for _, o := range opts {
		if err := o(a); err != nil {
			var fe *config.FieldError
			if errors.As(err, &fe) {
				return nil, err
			}
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if len(nodes) < 2 {
		return nil, config.Invalid(op, "nodes", "a topology needs at least two nodes, got %d", len(nodes))
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		name, conn := fmt.Sprintf("nodes[%d].name", i), fmt.Sprintf("nodes[%d].conn", i)
		if err := coordinator.CheckLabel("node name", n.Name); err != nil {
			return nil, config.Invalid(op, name, "%v", err)
		}
		if seen[n.Name] {
			return nil, config.Invalid(op, name, "node %q named twice", n.Name)
		}
		seen[n.Name] = true
		cfg, err := pgx.ParseConfig(n.ConnString)
		if err != nil {
			// pgx's parse error can quote the string; name the node only.
			return nil, config.Invalid(op, conn, "node %q: connection string does not parse", n.Name)
		}
		if cfg.Password != "" {
			return nil, config.Invalid(op, conn, "node %q: the connection string carries a password; put it in the password file", n.Name)
		}
		if !strings.Contains(n.ConnString, "host") && !strings.Contains(n.ConnString, "@") {
			return nil, config.Invalid(op, conn, "node %q: the connection string names no host", n.Name)
		}
		if err := config.Resolvable(cfg.Host); err != nil {
			return nil, config.Invalid(op, conn, "node %q: %v", n.Name, err)
		}
	}
	if _, err := config.ReadSecret("password file", passwordFile); err != nil {
		return nil, config.Invalid(op, "password_file", "%v", err)
	}
	a.nodes = append([]Node(nil), nodes...)
	return a, nil
}

// Kind is the effect kind served.
func (a *Adapter) Kind() string { return a.kind }

// Contract: PostgreSQL takes no idempotency key and cannot be asked "did
// you ever receive this promote?" (no Lookup); a retry under the same
// operation id is not declared safe (no RetrySafe), so a promotion the
// topology does not show goes to manual review rather than being sent
// again by the ledger on its own. Not Conditional either: Apply sends the
// part of the approved world the target itself can check (still a
// standby, on the approved timeline), but the server cannot check the
// other nodes' state — an old primary back as writer between the ledger's
// revalidation and the call is not refused by the standby.
func (a *Adapter) Contract() ledger.Contract { return ledger.Contract{} }

// Effect is a promotion of target with the loss bound the commander
// approved, as Propose takes it. Target must be a configured node.
func (a *Adapter) Effect(target, maxLoss, policy string) (ledger.Effect, error) {
	if !a.known(target) {
		return ledger.Effect{}, store.NewError(store.InvalidInput, "pgpromote", "", "", fmt.Sprintf("node %q is not in the topology", target), nil)
	}
	p, _ := json.Marshal(map[string]string{"target": target, "max_loss": maxLoss})
	return ledger.Effect{Kind: a.kind, Target: target, Params: p, Policy: policy}, nil
}

func (a *Adapter) known(name string) bool {
	for _, n := range a.nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

func (a *Adapter) node(name string) Node {
	for _, n := range a.nodes {
		if n.Name == name {
			return n
		}
	}
	return Node{}
}

// Precondition is the topology now, from every node's own server. The
// target must answer (else an error: the ledger holds); another node that
// does not answer is part of the world ("unreachable"), as it is in a
// failover.
func (a *Adapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	if !a.known(e.Target) {
		return ledger.Observation{}, fmt.Errorf("pgpromote: node %q is not in the topology", e.Target)
	}
	t := a.Topology(ctx)
	if n, _ := t.Node(e.Target); !n.Reachable {
		return ledger.Observation{}, fmt.Errorf("pgpromote: the target %s does not answer: %s", n.Name, n.Error)
	}
	return ledger.Observation{Digest: t.Digest(), At: t.At, Detail: t.detail()}, nil
}

// Apply promotes the target in one statement that is also the
// provider-side precondition: pg_promote runs only WHERE the target is
// still in recovery (and, when the approved topology is known, on the
// approved timeline), so a target promoted or re-pointed meanwhile is a
// definite refusal, not a second promotion. The connection's
// application_name carries the operation id and epoch, for the server's
// log and pg_stat_activity.
//
//   - true: promoted; the evidence is the target's topology after it.
//   - no row, or "recovery is not in progress": refused (nothing applied
//     by this call), with the topology as evidence.
//   - no connection to the target (nothing sent): refused.
//   - false (pg_promote's wait ran out), or a connection lost after send:
//     ambiguous — the promotion may still happen; Observe decides.
func (a *Adapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	e, operation, epoch := call.Effect, call.Operation, call.Epoch
	approvedTL := approvedTimeline(call.Approved, e.Target)
	if !a.known(e.Target) {
		return ledger.Evidence{}, ledger.Refused("node "+e.Target+" is not in the topology", a.evidence(ctx, "not sent", nil))
	}
	n := a.node(e.Target)
	conn, err := a.connect(ctx, n, truncate(fmt.Sprintf("leasegate %s epoch %d", operation, epoch), 63))
	if err != nil {
		return ledger.Evidence{}, ledger.Refused("could not connect to "+n.Name+"; nothing sent: "+err.Error(), a.evidence(ctx, "not sent: "+err.Error(), nil))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	q := fmt.Sprintf(`SELECT pg_promote(true, %d) FROM (SELECT pg_is_in_recovery() AS r,
		(SELECT timeline_id FROM pg_control_checkpoint())::bigint AS tl) s
		WHERE s.r AND ($1::bigint = 0 OR s.tl = $1::bigint)`, int(a.promoteWait/time.Second))
	var promoted bool
	err = conn.QueryRow(ctx, q, approvedTL).Scan(&promoted)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ledger.Evidence{}, ledger.Refused(n.Name+" is no longer the approved standby; pg_promote not run",
			a.evidence(ctx, "precondition refused by the server", nil))
	case errors.As(err, &pgErr) && (pgErr.Code == "55000" || pgErr.Code == "42501"):
		// object_not_in_prerequisite_state ("recovery is not in progress"),
		// insufficient_privilege: the server refused before promoting.
		return ledger.Evidence{}, ledger.Refused(n.Name+": "+pgErr.Message,
			a.evidence(ctx, "SQLSTATE "+pgErr.Code+": "+pgErr.Message, nil))
	case err != nil:
		// Not pgconn.SafeToRetry: after a read fails, pgx can report a
		// later "conn closed" that claims nothing was sent. The connection
		// was open and the statement written: ambiguous.
		return ledger.Evidence{}, ledger.Ambiguous(fmt.Errorf("pgpromote: pg_promote on %s: %w", n.Name, err))
	case !promoted:
		return a.evidence(ctx, "pg_promote returned false: not finished within its wait", nil),
			ledger.Ambiguous(fmt.Errorf("pgpromote: %s not promoted within %v; it may still promote", n.Name, a.promoteWait))
	}
	return a.evidence(ctx, "pg_promote returned true", []string{n.Name + "@promoted"}), nil
}

// Observe reconciles from the topology and the record; PostgreSQL keeps
// no record of the call. The target out of recovery on a timeline past
// the approved one (rec.Precondition) is Applied, with the topology as
// evidence — whoever promoted it, the effect holds. A target still in
// recovery is Pending while a promote sent at rec.DispatchedAt could still
// be finishing (within the promote wait), and NotApplied after that, or at
// once when the node restarted since the dispatch (a restart discards a
// pending promote signal). An unreachable target, or a writer still on the
// approved timeline, is Inconclusive.
func (a *Adapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	e, dispatchedAt := rec.Effect, rec.DispatchedAt
	if !a.known(e.Target) {
		return ledger.Inconclusive, ledger.Evidence{}, fmt.Errorf("pgpromote: node %q is not in the topology", e.Target)
	}
	t := a.Topology(ctx)
	n, _ := t.Node(e.Target)
	ev := ledger.Evidence{Detail: t.detail(), At: t.At}
	switch {
	case !n.Reachable:
		return ledger.Inconclusive, ledger.Evidence{}, fmt.Errorf("pgpromote: the target %s does not answer: %s", n.Name, n.Error)
	case !n.InRecovery && n.Timeline <= approvedTimeline(rec.Precondition, e.Target):
		// A writer on the approved timeline was a writer already: the
		// approval was of another world, and this is not its promotion.
		return ledger.Inconclusive, ev, fmt.Errorf("pgpromote: %s is a writer on timeline %d, not past the approved one", n.Name, n.Timeline)
	case !n.InRecovery:
		ev.ProviderIDs = []string{fmt.Sprintf("%s@timeline-%d", n.Name, n.Timeline)}
		return ledger.Applied, ev, nil
	case dispatchedAt.IsZero():
		return ledger.Pending, ev, nil
	}
	started, err := time.Parse("2006-01-02 15:04:05.999999-07", n.StartedAt)
	if err == nil && started.After(dispatchedAt) {
		return ledger.NotApplied, ev, nil
	}
	if t.At.Sub(dispatchedAt) < a.promoteWait {
		return ledger.Pending, ev, nil
	}
	return ledger.NotApplied, ev, nil
}

// approvedTimeline is the target's timeline in an approved observation
// (0 when it does not show one).
func approvedTimeline(o ledger.Observation, target string) int64 {
	var t Topology
	if json.Unmarshal(o.Detail, &t) != nil {
		return 0
	}
	n, _ := t.Node(target)
	return n.Timeline
}

// evidence is the topology now, with what the server said.
func (a *Adapter) evidence(ctx context.Context, said string, ids []string) ledger.Evidence {
	t := a.Topology(ctx)
	d, _ := json.Marshal(map[string]any{"server": said, "topology": t})
	return ledger.Evidence{ProviderIDs: ids, Detail: d, At: t.At}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
