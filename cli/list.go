package cli

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
)

// list: every task of a tenant (or of all), read at one revision.

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list every task ever claimed, owned or not",
		Description: example(`Lists the tasks of --tenant (of every tenant without it), read at one
revision: tenant, task, owner, epoch, lease, TTL left, state version, last
operation. Stale owners (from before the last 'realm rotate') show as
"stale:<owner>" and hold nothing. It only reads (no keyspace: exit 7).
With --gateway, --tenant is required unless your identity serves every
tenant.`,
			"leasegate list", "leasegate -o json list --tenant acme",
			"leasegate --gateway https://gw:7443 --cacert ca.pem --cert w.pem --key w-key.pem list --tenant acme"),
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
	if viaGateway(c) {
		return withGateway(c, func(ctx context.Context, gw *client.Client) error {
			tasks, err := gw.Tasks(ctx, tenant)
			if err != nil {
				return err
			}
			return printTasks(c, tasks)
		})
	}
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		tasks, err := co.List(ctx, tenant)
		if err != nil {
			return err
		}
		return printTasks(c, tasks)
	})
}

func printTasks(c *cli.Context, tasks []coordinator.Ownership) error {
	t := table{header: ownershipHeader}
	for _, o := range tasks {
		t.rows = append(t.rows, ownershipRow(o))
	}
	return globalsOf(c).out.result(listOutput{Disposition: ok, Tasks: tasks}, t)
}
