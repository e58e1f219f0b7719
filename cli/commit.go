package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
)

func commitCommand() *cli.Command {
	return &cli.Command{
		Name:  "commit",
		Usage: "protected write: commit a value under a grant, fenced by its epoch",
		Description: example(`Writes --value as the task's protected state, in one etcd Txn that checks the
grant is current (realm, fence, owner, epoch, live lease), that --operation was
not recorded yet, and that the state is at --expected-version. Prints the
receipt. Retrying the same operation with the same payload returns the original
receipt (historical_retry), even to a later owner; the same operation with
another payload is operation_conflict. --tenant and --task, if given, must name
the grant's task (scope_mismatch otherwise). The value is --value, or the bytes
of --value-file (a file, or - for stdin; up to 256 KiB); one of them is
required (--value "" writes an empty value on purpose).`,
			"leasegate commit --grant grant.json --operation invoice-42-paid --value paid --expected-version 0",
			"leasegate commit --grant grant.json --operation report-7 --value-file report.pdf --expected-version 3",
			"render-report | leasegate commit --grant grant.json --operation report-7 --value-file - --expected-version 3"),
		Flags: []cli.Flag{
			grantFlag(),
			&cli.StringFlag{Name: "operation", Usage: "operation id: the write's stable identity across retries and owners"},
			&cli.StringFlag{Name: "value", Usage: "the new protected state (or --value-file)"},
			&cli.StringFlag{Name: "value-file", Usage: "read the new protected state from this file, or - for stdin: binary or large values", TakesFile: true},
			&cli.Int64Flag{Name: "expected-version", Usage: "the state version the write was decided against (0: never written)"},
			tenantFlag("tenant the write is for (default: the grant's)"),
			taskFlag("task the write is for (default: the grant's)"),
		},
		Action: commit,
	}
}

func commit(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	op := commandName(c)
	g, err := grantOf(c)
	if err != nil {
		return err
	}
	l, err := labels(c, "operation")
	if err != nil {
		return err
	}
	if !c.IsSet("expected-version") {
		return store.NewError(store.InvalidInput, op, "", "", "--expected-version is required (0 for a task never written)", nil)
	}
	value, err := valueOf(c)
	if err != nil {
		return err
	}
	in := fencedtxn.Intent{Tenant: g.Tenant, Task: g.Task, Operation: l[0], Value: value,
		ExpectedVersion: c.Int64("expected-version")}
	if in.ExpectedVersion < 0 {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--expected-version %d is negative", in.ExpectedVersion), nil)
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"tenant", &in.Tenant}, {"task", &in.Task}} {
		if c.IsSet(f.name) {
			if err := coordinator.CheckLabel(f.name, c.String(f.name)); err != nil {
				return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--%s: %v", f.name, err), nil)
			}
			*f.v = c.String(f.name)
		}
	}
	// Commit refuses this before its I/O too; the CLI refuses it before it
	// connects, so that nothing at all is sent.
	if in.Tenant != g.Tenant || in.Task != g.Task {
		return store.NewError(coordinator.ScopeMismatch, op, in.Tenant, in.Task, fmt.Sprintf("the grant is for %s/%s", g.Tenant, g.Task), nil)
	}
	if viaGateway(c) {
		return withGateway(c, func(ctx context.Context, gw *client.Client) error {
			r, err := gw.Commit(ctx, g, in)
			if err != nil {
				return err
			}
			return printReceipt(c, r)
		})
	}
	return withCoordinator(c, acts, func(ctx context.Context, co *coordinator.Coordinator) error {
		r, err := fencedtxn.Commit(ctx, co, g, in)
		if err != nil {
			return err
		}
		return printReceipt(c, r)
	})
}

// printReceipt prints a commit's receipt.
func printReceipt(c *cli.Context, r fencedtxn.Receipt) error {
	return globalsOf(c).out.result(r, table{
		header: []string{"DISPOSITION", "TENANT", "TASK", "OPERATION", "VERSION", "EPOCH", "REVISION"},
		rows: [][]string{{string(r.Disposition), r.Tenant, r.Task, r.Operation, num(r.CommittedVersion),
			num(r.Epoch), num(r.Revision)}},
	})
}

// valueOf reads the value to commit: --value, or --value-file (a file, or -
// for the app's reader). One of them is required: a commit without a value
// would silently write an empty one.
func valueOf(c *cli.Context) ([]byte, error) {
	op := commandName(c)
	max := fencedtxn.DefaultMaxValueBytes
	switch {
	case c.IsSet("value") && c.IsSet("value-file"):
		return nil, store.NewError(store.InvalidInput, op, "", "", "give --value or --value-file, not both", nil)
	case c.IsSet("value"):
		v := c.String("value")
		if len(v) > max {
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--value is %d bytes; at most %d (the limit of one protected value)", len(v), max), nil)
		}
		return []byte(v), nil
	case !c.IsSet("value-file"):
		return nil, store.NewError(store.InvalidInput, op, "", "", "--value or --value-file is required (--value \"\" to write an empty value)", nil)
	}
	name := c.String("value-file")
	if name == "-" && c.String("grant") == "-" {
		return nil, store.NewError(store.InvalidInput, op, "", "", "--grant - and --value-file - cannot both read stdin", nil)
	}
	var r io.Reader = c.App.Reader
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--value-file: %v", err), nil)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--value-file %s: %v", name, err), nil)
	}
	if len(data) > max {
		return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--value-file %s is larger than %d bytes (the limit of one protected value)", name, max), nil)
	}
	return data, nil
}
