package cli

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
)

// status: one task's ownership and state (list.go lists many, watch.go
// streams changes).

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
	if viaGateway(c) {
		return statusViaGateway(c, l[0], l[1])
	}
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		o, err := co.Owner(ctx, l[0], l[1])
		if err != nil {
			return err
		}
		return globalsOf(c).out.result(ownershipOutput{Disposition: ok, Ownership: o},
			table{header: ownershipHeader, rows: [][]string{ownershipRow(o)}})
	})
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
