package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// The effect ledger: list records, show one with its journal, resolve one
// in MANUAL_REVIEW.

func opsCommand() *cli.Command {
	return &cli.Command{
		Name:  "ops",
		Usage: "the effect ledger: list, show and resolve operations on external providers",
		Subcommands: []*cli.Command{
			opsListCommand(),
			opsShowCommand(),
			opsResolveCommand(),
		},
	}
}

func opsListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list effect records: operation, state, kind, target, dispatching epoch",
		Description: example(`Lists the effect ledger's records of every tenant, of --tenant, or of one task
(--tenant and --task), read at one revision; --state keeps only records in that
state (PROPOSED, AUTHORIZED, DISPATCHING, CONFIRMED, FAILED, UNKNOWN,
SUPERSEDED, MANUAL_REVIEW, REJECTED). Reads only: a prefix with no keyspace is
no_keyspace (exit 7) and nothing is written.`,
			"leasegate ops list",
			"leasegate ops list --tenant acme --state MANUAL_REVIEW",
			"leasegate -o json ops list --tenant acme --task failover"),
		Flags: []cli.Flag{tenantFlag("only this tenant's records"), taskFlag("only this task's records (needs --tenant)"),
			&cli.StringFlag{Name: "state", Usage: "only records in this state (e.g. UNKNOWN, MANUAL_REVIEW)"}},
		Action: opsList,
	}
}

func opsShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one operation's record and its journal, in transition order",
		ArgsUsage: "OPERATION",
		Description: example(`Prints one operation's record (state, effect, digests, approval, dispatching
epoch, attempts, evidence) and every journal entry of it in the order the
transitions happened: from, to, by which call, epoch and owner of the grant
that made it, approver, reason, evidence, and the etcd revision it was written
at. Give the operation as the argument (before it, the flags) or --operation.
Reads only.`,
			"leasegate ops show --tenant acme --task failover promote-db-b",
			"leasegate -o json ops show --tenant acme --task failover --operation promote-db-b"),
		Flags: []cli.Flag{tenantFlag("tenant of the task"), taskFlag("task the operation belongs to"),
			&cli.StringFlag{Name: "operation", Usage: "operation id (or give it as the argument)"}},
		Action: opsShow,
	}
}

func opsResolveCommand() *cli.Command {
	return &cli.Command{
		Name:  "resolve",
		Usage: "an operator's decision on an operation in MANUAL_REVIEW, journaled with approver and why",
		Description: example(`Moves an operation that the ledger could not settle (MANUAL_REVIEW) to
CONFIRMED or FAILED (both need the provider's evidence: --provider-id and/or
--evidence), SUPERSEDED or REJECTED. It is a transition like any other: fenced by
the task's grant (--grant; a stale grant is refused) and journaled with
--approver and --why. Any other state is refused (illegal_transition, exit 1)
and nothing is written. With --gateway it needs an operator certificate of
the task's tenant, the approver journaled is that certificate's identity
(--approver is refused), and --grant must be the task's current grant.`,
			`leasegate ops resolve --grant grant.json --operation promote-db-b --to CONFIRMED --provider-id cloudtrail-4f1e --approver imani --why "CloudTrail shows the promotion; Aurora names db-b writer"`,
			`leasegate ops resolve --grant grant.json --operation dns-1 --to SUPERSEDED --approver imani --why "traffic moved by change R-009"`),
		Flags: []cli.Flag{
			grantFlag(),
			&cli.StringFlag{Name: "operation", Usage: "operation id"},
			&cli.StringFlag{Name: "to", Usage: "CONFIRMED, FAILED, SUPERSEDED or REJECTED"},
			&cli.StringSliceFlag{Name: "provider-id", Usage: "the provider's request, change or audit id (repeatable)"},
			&cli.StringFlag{Name: "evidence", Usage: "evidence detail: one JSON value"},
			&cli.StringFlag{Name: "approver", Usage: "who decides (a label)"},
			&cli.StringFlag{Name: "why", Usage: "why: what the evidence shows"},
		},
		Action: opsResolve,
	}
}

type opsListOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Records     []ledger.Record         `json:"records"`
}

type opsShowOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Record      ledger.Record           `json:"record"`
	Journal     []ledger.Transition     `json:"journal"`
}

type opsRecordOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Record      ledger.Record           `json:"record"`
}

func opsList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	op := commandName(c)
	tenant, err := optionalTenant(c)
	if err != nil {
		return err
	}
	var task string
	if c.IsSet("task") {
		if tenant == "" {
			return store.NewError(store.InvalidInput, op, "", "", "--task needs --tenant", nil)
		}
		l, err := labels(c, "task")
		if err != nil {
			return err
		}
		task = l[0]
	}
	var state ledger.State
	if c.IsSet("state") {
		if state, err = ledger.ParseState(strings.ToUpper(c.String("state"))); err != nil {
			return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--state: %v", err), nil)
		}
	}
	if viaGateway(c) {
		return opsListViaGateway(c, tenant, task, state)
	}
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		l, err := ledger.New(co)
		if err != nil {
			return err
		}
		recs, err := l.List(ctx, tenant, task, state)
		if err != nil {
			return err
		}
		if recs == nil {
			recs = []ledger.Record{}
		}
		return globalsOf(c).out.result(opsListOutput{Disposition: ok, Records: recs}, recordsTable(recs))
	})
}

func recordsTable(recs []ledger.Record) table {
	t := table{header: []string{"TENANT", "TASK", "OPERATION", "STATE", "KIND", "TARGET", "EPOCH", "ATTEMPTS", "REVISION"}}
	for _, r := range recs {
		t.rows = append(t.rows, []string{r.Tenant, r.Task, r.Operation, string(r.State), r.Effect.Kind, r.Effect.Target,
			numOrDash(r.Epoch), strconv.Itoa(r.Attempts), num(r.Revision)})
	}
	return t
}

func opsShow(c *cli.Context) error {
	op := commandName(c)
	// urfave/cli v2 stops parsing flags at the first argument; the documented
	// form is 'ops show OP --tenant T --task K', so flags after OP are read here.
	var operation string
	if args := c.Args().Slice(); len(args) > 0 {
		operation = args[0]
		if err := trailingFlags(c, args[1:]); err != nil {
			return err
		}
	}
	flagOp := c.String("operation")
	switch {
	case operation != "" && flagOp != "":
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("the operation is given twice: as the argument %q and --operation %q", operation, flagOp), nil)
	case operation == "" && flagOp == "":
		return store.NewError(store.InvalidInput, op, "", "", "which operation? give it as the argument or --operation", nil)
	case operation == "":
		operation = flagOp
	}
	if err := coordinator.CheckLabel("operation", operation); err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	l, err := labels(c, "tenant", "task")
	if err != nil {
		return err
	}
	if viaGateway(c) {
		return opsShowViaGateway(c, l[0], l[1], operation)
	}
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		led, err := ledger.New(co)
		if err != nil {
			return err
		}
		rec, journal, err := led.Record(ctx, l[0], l[1], operation)
		if err != nil {
			return err
		}
		return printRecord(c, l[0], l[1], operation, rec, journal)
	})
}

// printRecord prints ops show's answer: the record and its journal.
func printRecord(c *cli.Context, tenant, task, operation string, rec ledger.Record, journal []ledger.Transition) error {
	if rec.State == "" {
		return store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("no operation %q is recorded for %s/%s", operation, tenant, task), nil)
	}
	p := globalsOf(c).out
	if p.json {
		return p.result(opsShowOutput{Disposition: ok, Record: rec, Journal: journal}, table{})
	}
	if err := p.result(nil, recordTable(rec)); err != nil {
		return err
	}
	fmt.Fprintln(p.w)
	return p.result(nil, journalTable(journal))
}

func opsResolve(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	op := commandName(c)
	g, err := grantOf(c)
	if err != nil {
		return err
	}
	if viaGateway(c) && c.IsSet("approver") {
		return store.NewError(store.InvalidInput, op, "", "", "--approver cannot be given with --gateway: the approver is the identity of your certificate", nil)
	}
	names := []string{"operation", "approver"}
	if viaGateway(c) {
		names = names[:1] // the gateway journals the certificate's identity as approver
	}
	l, err := labels(c, names...)
	if err != nil {
		return err
	}
	to, err := ledger.ParseState(strings.ToUpper(c.String("to")))
	if err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--to: %v", err), nil)
	}
	ev := ledger.Evidence{ProviderIDs: c.StringSlice("provider-id")}
	if d := c.String("evidence"); d != "" {
		if !json.Valid([]byte(d)) {
			return store.NewError(store.InvalidInput, op, "", "", "--evidence is not one JSON value (quote a string: '\"seen in the console\"')", nil)
		}
		ev.Detail = json.RawMessage(d)
	}
	why := c.String("why")
	if why == "" {
		return store.NewError(store.InvalidInput, op, "", "", "--why is required: what the evidence shows", nil)
	}
	if viaGateway(c) {
		return opsResolveViaGateway(c, g, l[0], to, ev, why)
	}
	return withCoordinator(c, acts, func(ctx context.Context, co *coordinator.Coordinator) error {
		led, err := ledger.New(co)
		if err != nil {
			return err
		}
		rec, err := led.Resolve(ctx, g, l[0], to, ev, l[1], why)
		if err != nil {
			return err
		}
		return globalsOf(c).out.result(opsRecordOutput{Disposition: ok, Record: rec}, recordTable(rec))
	})
}

func recordTable(r ledger.Record) table {
	t := table{header: []string{"FIELD", "VALUE"}}
	add := func(k, v string) { t.rows = append(t.rows, []string{k, v}) }
	add("tenant", r.Tenant)
	add("task", r.Task)
	add("operation", r.Operation)
	add("state", string(r.State))
	add("kind", r.Effect.Kind)
	add("target", r.Effect.Target)
	add("params", orDash(string(r.Effect.Params)))
	add("policy", r.Effect.Policy)
	add("params-digest", r.ParamsDigest)
	add("precondition", fmt.Sprintf("%s (seen %s)", r.Precondition.Digest, r.Precondition.At.Format("2006-01-02T15:04:05.000Z07:00")))
	if r.Approval != nil {
		add("approval", fmt.Sprintf("%s by %s", orDash(r.ApprovalDigest), r.Approval.Approver))
	} else {
		add("approval", "-")
	}
	add("proposed-epoch", num(r.ProposedEpoch))
	add("epoch", numOrDash(r.Epoch))
	add("owner", orDash(r.Owner))
	add("attempts", strconv.Itoa(r.Attempts))
	add("dispatch-id", orDash(r.DispatchID))
	add("evidence", evidenceText(r.Evidence))
	add("revision", num(r.Revision))
	return t
}

func journalTable(js []ledger.Transition) table {
	t := table{header: []string{"SEQ", "REVISION", "FROM", "TO", "BY", "EPOCH", "OWNER", "APPROVER", "EVIDENCE", "REASON"}}
	for _, j := range js {
		t.rows = append(t.rows, []string{num(j.Seq), num(j.Revision), orDash(string(j.From)), string(j.To), string(j.By),
			num(j.Epoch), j.Owner, orDash(j.Approver), evidenceText(j.Evidence), oneLine(j.Reason)})
	}
	return t
}

func evidenceText(ev *ledger.Evidence) string {
	if ev == nil || ev.Empty() {
		return "-"
	}
	parts := append([]string(nil), ev.ProviderIDs...)
	if len(ev.Detail) > 0 {
		parts = append(parts, oneLine(string(ev.Detail)))
	}
	return strings.Join(parts, " ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// trailingFlags parses flags that follow the command's argument into the
// command's own flag set, as if they had come before it, and applies a
// trailing -o.
func trailingFlags(c *cli.Context, args []string) error {
	op := commandName(c)
	set := flag.NewFlagSet(op, flag.ContinueOnError)
	set.SetOutput(io.Discard)
	for _, f := range c.Command.Flags {
		if err := f.Apply(set); err != nil {
			return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if err := set.Parse(args); err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if set.NArg() > 0 {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("unexpected argument %q; see 'leasegate %s --help'", set.Arg(0), op), nil)
	}
	var err error
	set.Visit(func(f *flag.Flag) {
		if err == nil {
			err = c.Set(f.Name, f.Value.String())
		}
	})
	if err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	return commandOutput(c)
}
