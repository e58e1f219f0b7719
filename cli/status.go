package cli

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
)

// Ownership views: status of one task, list of many, watch for changes.

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show a task's owner, epoch, lease, TTL left and state version",
		Description: example(`Reads one task linearizably: who owns it, since which epoch, on which lease
and with how many seconds left, and the protected state's version and last
operation. An unowned task shows "-" for owner, epoch, lease and TTL. An owner
written before the last 'realm rotate' holds nothing: it shows as
"stale:<owner>" (JSON: "stale": true), with no TTL. It only reads: a prefix
without a leasegate keyspace is no_keyspace (exit 7), and nothing is created.`,
			"leasegate status --tenant acme --task invoices"),
		Flags:  []cli.Flag{tenantFlag("tenant of the task"), taskFlag("task to show")},
		Action: status,
	}
}

func status(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	l, err := labels(c, "tenant", "task")
	if err != nil {
		return err
	}
	return withReader(c, func(ctx context.Context, co *coordinator.Coordinator) error {
		o, err := co.Owner(ctx, l[0], l[1])
		if err != nil {
			return err
		}
		return globalsOf(c).out.result(ownershipOutput{Disposition: ok, Ownership: o},
			table{header: ownershipHeader, rows: [][]string{ownershipRow(o)}})
	})
}

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list every task ever claimed, owned or not",
		Description: example(`Lists the tasks of --tenant (of every tenant without it), read at one
revision: tenant, task, owner, epoch, lease, TTL left, state version, last
operation. Stale owners (from before the last 'realm rotate') show as
"stale:<owner>" and hold nothing. It only reads (no keyspace: exit 7).`,
			"leasegate list", "leasegate -o json list --tenant acme"),
		Flags:  []cli.Flag{tenantFlag("only this tenant's tasks")},
		Action: list,
	}
}

func list(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	tenant, err := optionalTenant(c)
	if err != nil {
		return err
	}
	return withReader(c, func(ctx context.Context, co *coordinator.Coordinator) error {
		tasks, err := co.List(ctx, tenant)
		if err != nil {
			return err
		}
		t := table{header: ownershipHeader}
		for _, o := range tasks {
			t.rows = append(t.rows, ownershipRow(o))
		}
		return globalsOf(c).out.result(listOutput{Disposition: ok, Tasks: tasks}, t)
	})
}

func watchCommand() *cli.Command {
	return &cli.Command{
		Name:  "watch",
		Usage: "stream ownership changes until interrupted",
		Description: example(`Prints the current owners first ("owned"), then every change as it happens:
"claimed" for a new grant, "vacated" when an owner key goes (release, expiry,
revocation). If etcd cuts the watch it re-lists and reports the difference.
Runs until interrupted (Ctrl-C).`,
			"leasegate watch --tenant acme", "leasegate -o json watch | jq -c .",
			"leasegate watch --metrics-addr 127.0.0.1:9464   # Prometheus metrics at http://127.0.0.1:9464/metrics"),
		Flags:  []cli.Flag{tenantFlag("only this tenant's tasks"), metricsAddrFlag()},
		Action: watch,
	}
}

// watchWidths are the widths of watch's columns: EVENT, TENANT, TASK, OWNER,
// EPOCH, LEASE (16 hex digits, as etcdctl prints it) and REVISION.
var watchWidths = []int{len("claimed"), 12, 12, 12, 10, len(coordinator.FormatLeaseID(1)), 0}

func watch(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	tenant, err := optionalTenant(c)
	if err != nil {
		return err
	}
	metrics, stopMetrics, err := serveMetrics(c)
	if err != nil {
		return err
	}
	defer stopMetrics()
	ctx, cancel := commandContext(c)
	co, done, err := connectWith(ctx, c, coordinator.Open, metricsOptions(metrics)...)
	cancel()
	if err != nil {
		return err
	}
	defer done()
	// Cancelling on return ends the watch goroutine even if printing failed.
	wctx, stop := context.WithCancel(c.Context)
	defer stop()
	events, err := co.Watch(wctx, tenant)
	if err != nil {
		return err
	}
	out := globalsOf(c).out
	if !out.json {
		if err := out.stream(nil, []string{"EVENT", "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "REVISION"}, watchWidths); err != nil {
			return err
		}
	}
	for ev := range events {
		o := ev.Ownership
		row := []string{string(ev.Type), o.Tenant, o.Task, orDash(o.Owner), numOrDash(o.Epoch), leaseOrDash(o.Lease), num(o.Revision)}
		if err := out.stream(eventOutput{Disposition: ok, OwnershipEvent: ev}, row, watchWidths); err != nil {
			return err
		}
	}
	return nil
}

func optionalTenant(c *cli.Context) (string, error) {
	if !c.IsSet("tenant") {
		return "", nil
	}
	l, err := labels(c, "tenant")
	if err != nil {
		return "", err
	}
	return l[0], nil
}
