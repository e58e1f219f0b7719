package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/retention"
)

func gcCommand() *cli.Command {
	return &cli.Command{
		Name:  "gc",
		Usage: "retention: list (or, with --apply, delete) operation records, idle fences and clock marks past the window",
		Description: example(`Keeps the keyspace bounded. Without --apply it only lists what it would delete
and writes nothing. With --apply it first writes a retention clock mark (etcd
keeps no wall-clock time; the marks are gc's clock), then deletes, each in a
guarded Txn:
  - operation records older than --retention, while the task's state is at or
    past the version they committed (a retry past the window is refused with
    version_conflict, never applied twice; within it, it gets its receipt);
  - fences of tasks with no owner, not written within --retention (a stale
    grant stays refused: stale_owner);
  - clock marks no longer needed.
A record is "older than the window" once a mark at least --retention old was
written after it, so the first --apply deletes nothing: schedule it (cron, a
timer) at an interval well below the window. A large keyspace may need a
longer --command-timeout. See docs/operations.md (retention).
gc does not work through --gateway: it is the deployment's job, run with
--endpoints and etcd's credentials (docs/gateway.md).`,
			"leasegate gc",
			"leasegate gc --retention 72h --apply",
			"leasegate -o json --command-timeout 1m gc --apply"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "apply", Usage: "delete (default: a dry run that writes nothing)"},
			&cli.DurationFlag{Name: "retention", Usage: "the retention window: how long a retry still gets its receipt (at least 1s)",
				Value: retention.DefaultWindow},
		},
		Action: gc,
	}
}

// gcOutput is gc's result. Candidates is what a dry run would delete;
// Deleted and Kept (guard failed at delete time) are what --apply did.
type gcOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Applied     bool                    `json:"applied"`
	Window      string                  `json:"window"`
	Horizon     int64                   `json:"horizon"`
	HorizonTime *time.Time              `json:"horizon_time,omitempty"`
	Candidates  []retention.Candidate   `json:"candidates"`
	Deleted     []retention.Candidate   `json:"deleted,omitempty"`
	Kept        []retention.Candidate   `json:"kept,omitempty"`
}

func gc(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if viaGateway(c) {
		return store.NewError(store.InvalidInput, commandName(c), "", "", "gc does not work through --gateway: retention deletes records and fences "+
			"across the whole keyspace, the deployment's maintenance job and no caller's; run it with --endpoints "+
			"where etcd's credentials are, beside the gateway (docs/gateway.md)", nil)
	}
	window := c.Duration("retention")
	if window < time.Second {
		return store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("--retention %v: the window is at least 1s", window), nil)
	}
	// Retention only ever deletes from a keyspace that exists: it never
	// creates one (no keyspace: no_keyspace, exit 7).
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		col, err := retention.New(co, retention.WithWindow(window))
		if err != nil {
			return err
		}
		out := gcOutput{Disposition: ok, Applied: c.Bool("apply"), Window: window.String()}
		var p retention.Plan
		var r retention.Result
		if out.Applied {
			p, r, err = col.Run(ctx)
		} else {
			p, err = col.Plan(ctx)
		}
		if err != nil {
			return err
		}
		out.Horizon, out.Candidates, out.Deleted, out.Kept = p.Horizon, p.Candidates, r.Deleted, r.Kept
		if out.Candidates == nil {
			out.Candidates = []retention.Candidate{}
		}
		if !p.HorizonTime.IsZero() {
			out.HorizonTime = &p.HorizonTime
		}
		return globalsOf(c).out.result(out, gcTable(out))
	})
}

func gcTable(o gcOutput) table {
	t := table{header: []string{"ACTION", "KIND", "TENANT", "TASK", "OPERATION", "KEY"}}
	add := func(action string, cs []retention.Candidate) {
		for _, x := range cs {
			t.rows = append(t.rows, []string{action, string(x.Kind), orDash(x.Tenant), orDash(x.Task), orDash(x.Operation), x.Key})
		}
	}
	switch {
	case !o.Applied:
		add("would-delete", o.Candidates)
	default:
		add("deleted", o.Deleted)
		add("kept", o.Kept)
	}
	if o.Horizon == 0 {
		t.rows = append(t.rows, []string{"none", "-", "-", "-", "-", "no retention mark is " + o.Window + " old yet: run 'leasegate gc --apply' periodically"})
	}
	return t
}
