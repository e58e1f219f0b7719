package cli

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
)

func getCommand() *cli.Command {
	return &cli.Command{
		Name:  "get",
		Usage: "show a task's protected state: value, version, last operation and epoch, revision",
		Description: example(`Reads the task's protected state linearizably, as its last commit left it: the
value, the version (number of commits; 0 if never committed), the operation id
and grant epoch of the last commit, and the etcd revision it was written at.
In JSON the value is base64 (it may be binary), as etcdctl's -w json shows
values; the table shows it as text when it is printable, else its size.
--value-only writes the raw value bytes alone to stdout (as etcdctl's
--print-value-only), for files and pipes. It only reads: a prefix without a
leasegate keyspace is no_keyspace (exit 7), and nothing is created.`,
			"leasegate get --tenant acme --task invoices",
			"leasegate get --tenant acme --task report --value-only > report.pdf"),
		Flags: []cli.Flag{
			tenantFlag("tenant of the task"), taskFlag("task to read"),
			&cli.BoolFlag{Name: "value-only", Usage: "print only the raw value bytes"},
		},
		Action: get,
	}
}

// stateOutput is get's result.
type stateOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	State       fencedtxn.State         `json:"state"`
}

func get(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	l, err := labels(c, "tenant", "task")
	if err != nil {
		return err
	}
	if viaGateway(c) {
		return withGateway(c, func(ctx context.Context, gw *client.Client) error {
			st, err := gw.Get(ctx, l[0], l[1])
			if err != nil {
				return err
			}
			return printState(c, st)
		})
	}
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		st, err := fencedtxn.Get(ctx, co, l[0], l[1])
		if err != nil {
			return err
		}
		return printState(c, st)
	})
}

// printState prints a task's protected state (the raw value alone with
// --value-only).
func printState(c *cli.Context, st fencedtxn.State) error {
	if c.Bool("value-only") {
		_, err := c.App.Writer.Write(st.Value)
		return err
	}
	return globalsOf(c).out.result(stateOutput{Disposition: ok, State: st}, table{
		header: []string{"TENANT", "TASK", "VERSION", "LAST-OPERATION", "EPOCH", "REVISION", "VALUE"},
		rows: [][]string{{st.Tenant, st.Task, num(st.Version), orDash(st.Operation), numOrDash(st.Epoch),
			numOrDash(st.Revision), valueCell(st)}},
	})
}

// maxValueCell bounds the value shown in a table.
const maxValueCell = 64

// valueCell is the value as a table shows it: quoted text if printable,
// else its size.
func valueCell(st fencedtxn.State) string {
	if !st.Committed() && st.Value == nil {
		return "-"
	}
	v := st.Value
	if !utf8.Valid(v) {
		return "(" + strconv.Itoa(len(v)) + " bytes, binary: use -o json or --value-only)"
	}
	for _, r := range string(v) {
		if r < 0x20 || r == 0x7f {
			return "(" + strconv.Itoa(len(v)) + " bytes, not printable: use -o json or --value-only)"
		}
	}
	if len(v) > maxValueCell {
		return strconv.Quote(string(v[:maxValueCell])) + "… (" + strconv.Itoa(len(v)) + " bytes: use --value-only)"
	}
	return strconv.Quote(string(v))
}
