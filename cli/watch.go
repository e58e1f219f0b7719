package cli

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
)

// watch: the current owners, then every change of ownership as it happens.

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
	if viaGateway(c) {
		return watchViaGateway(c, tenant)
	}
	metrics, stopMetrics, err := serveMetrics(c)
	if err != nil {
		return err
	}
	defer stopMetrics()
	ctx, cancel := commandContext(c)
	co, done, err := connect(ctx, c, reads, metricsOptions(metrics)...)
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
