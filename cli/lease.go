package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

func leaseCommand() *cli.Command {
	return &cli.Command{
		Name:  "lease",
		Usage: "inspect and revoke the etcd leases that carry owner keys",
		Subcommands: []*cli.Command{
			leaseListCommand(),
			leaseShowCommand(),
			leaseRevokeCommand(),
		},
	}
}

func leaseListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list every lease carrying owner keys of this keyspace",
		Description: example(`Lists, read at one revision, every lease that carries owner keys under
--prefix: its ID (hex, as etcdctl prints it), its owner, the TTL it was granted
with, the TTL etcd has left on it, and the tasks it holds. A task marked
"stale:" has an owner key written before the last 'realm rotate': it holds
nothing. etcdctl's 'lease list' and 'lease timetolive --keys', in tasks and
owners. It only reads. With --gateway it needs an operator certificate of
every tenant (a lease may hold any tenant's tasks).`,
			"leasegate lease list", "leasegate -o json lease list | jq -r '.leases[].id'",
			"leasegate --gateway https://gw:7443 --cacert ca.pem --cert op.pem --key op-key.pem lease list"),
		Action: leaseList,
	}
}

func leaseShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one lease: owner, granted TTL, TTL left, tasks",
		ArgsUsage: "ID | --grant FILE",
		Description: example(`Shows one lease, named by its ID (hex as printed, or decimal) or by a grant
file (or claim's output): the same fields as 'lease list'. A lease etcd no
longer knows — expired or revoked — is expired_owner (exit 1). It only reads.
With --gateway it needs an operator certificate of every tenant the lease
holds a task of (else permission_denied, exit 6).`,
			"leasegate lease show 694d7c7e0c1f4a01", "leasegate lease show --grant grant.json"),
		Flags:  []cli.Flag{grantFlag()},
		Action: leaseShow,
	}
}

func leaseRevokeCommand() *cli.Command {
	return &cli.Command{
		Name:  "revoke",
		Usage: "operator's forced expiry: revoke a leasegate lease and every owner key on it",
		Description: example(`Revokes the lease: etcd deletes every key attached to it at once, so every
task claimed on it is vacated and its grant is refused (expired_owner) from
then on; a 'leasegate run' holding it stops its child. --lease takes the
ID in hex as leasegate and etcdctl print it (or decimal, or 0x and hex);
--grant takes a grant file (or claim's output) and revokes its lease.

Only a lease that carries owner keys of this keyspace (--prefix) and no
other key is revoked: another application's lease, a lease with keys
outside the keyspace, or one whose tasks were all released is refused
(invalid_input, exit 2) and nothing is revoked. The check is a read sent
right before the revoke: a key attached to the lease in between is
deleted with it.

--force revokes whatever the lease carries. It is dangerous: revoking
another application's lease deletes its keys (a lock, a registration) at
once, and etcd lets any user revoke a lease that carries no key.

With --gateway it needs an operator certificate of every tenant, and
--force is refused (the gateway revokes only leasegate leases).`,
			"leasegate lease revoke --lease 694d7c7e0c1f4a01",
			"leasegate lease revoke --lease 7587883720139372801",
			"leasegate lease revoke --grant grant.json",
			"leasegate lease revoke --force --lease 694d7c7e0c1f4a01   # DANGEROUS: any lease, any keys"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "lease", Usage: "lease ID: hex as printed (694d7c7e0c1f4a01), or decimal"},
			grantFlag(),
			&cli.BoolFlag{Name: "force", Usage: "DANGEROUS: revoke the lease whatever keys it carries, another application's too"},
		},
		Action: leaseRevoke,
	}
}

// leasesOutput is lease list's result.
type leasesOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Leases      []coordinator.LeaseInfo `json:"leases"`
}

// leaseOutput is lease show's result.
type leaseOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Lease       coordinator.LeaseInfo   `json:"lease"`
}

var leaseHeader = []string{"LEASE", "OWNER", "GRANTED-TTL", "TTL", "TASKS"}

func leaseRow(li coordinator.LeaseInfo) []string {
	ttl := "expired"
	if li.TTLLeft >= 0 {
		ttl = fmt.Sprintf("%ds", li.TTLLeft)
	}
	var tasks []string
	for _, t := range li.Tasks {
		name := t.Tenant + "/" + t.Task
		if t.Stale {
			name = "stale:" + name
		}
		tasks = append(tasks, name)
	}
	return []string{coordinator.FormatLeaseID(li.ID), orDash(li.Owner), fmt.Sprintf("%ds", li.GrantedTTL), ttl,
		orDash(strings.Join(tasks, ","))}
}

func leaseList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	printLeases := func(leases []coordinator.LeaseInfo) error {
		t := table{header: leaseHeader}
		for _, li := range leases {
			t.rows = append(t.rows, leaseRow(li))
		}
		return globalsOf(c).out.result(leasesOutput{Disposition: ok, Leases: leases}, t)
	}
	if viaGateway(c) {
		return withGateway(c, func(ctx context.Context, gw *client.Client) error {
			leases, err := gw.Leases(ctx)
			if err != nil {
				return err
			}
			return printLeases(leases)
		})
	}
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		leases, err := co.Leases(ctx)
		if err != nil {
			return err
		}
		return printLeases(leases)
	})
}

func leaseShow(c *cli.Context) error {
	args := c.Args()
	if args.Len() > 1 {
		return store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("unexpected argument %q; see 'leasegate %s --help'", args.Get(1), commandName(c)), nil)
	}
	id, err := leaseOf(c, "a lease ID", args.First(), args.Present())
	if err != nil {
		return err
	}
	show := func(li coordinator.LeaseInfo) error {
		return globalsOf(c).out.result(leaseOutput{Disposition: ok, Lease: li}, table{header: leaseHeader, rows: [][]string{leaseRow(li)}})
	}
	if viaGateway(c) {
		return withGateway(c, func(ctx context.Context, gw *client.Client) error {
			li, err := gw.Lease(ctx, id)
			if err != nil {
				return err
			}
			return show(li)
		})
	}
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		li, err := co.Lease(ctx, id)
		if err != nil {
			return err
		}
		return show(li)
	})
}

// leaseOf reads the lease an operator names: by ID (what; hex as printed,
// or decimal), or by --grant FILE — one of the two.
func leaseOf(c *cli.Context, what, id string, given bool) (int64, error) {
	op := commandName(c)
	switch {
	case given && c.IsSet("grant"):
		return 0, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("give %s or --grant, not both", what), nil)
	case c.IsSet("grant"):
		g, err := grantOf(c)
		return g.Lease, err
	case !given:
		return 0, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%s or --grant is required; see 'leasegate %s --help'", what, op), nil)
	}
	n, err := coordinator.ParseLeaseID(id)
	if err != nil {
		return 0, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%s: %v", what, err), nil)
	}
	return n, nil
}

// revokeOutput is lease revoke's result: which tasks of this keyspace the
// revocation vacated.
type revokeOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Lease       string                  `json:"lease"`            // hex, as etcdctl prints it
	TTLLeft     int64                   `json:"ttl_left_seconds"` // what was left when it was revoked
	Vacated     []taskRef               `json:"vacated"`
}

type taskRef struct {
	Tenant string `json:"tenant"`
	Task   string `json:"task"`
}

func leaseRevoke(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	id, err := leaseOf(c, "--lease", c.String("lease"), c.IsSet("lease"))
	if err != nil {
		return err
	}
	if viaGateway(c) {
		return leaseRevokeViaGateway(c, id)
	}
	var out revokeOutput
	err = withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) (err error) {
		out, err = revokeLease(ctx, co, id, c.Bool("force"))
		return err
	})
	if err != nil {
		return err
	}
	return printRevoked(c, out)
}

// printRevoked prints lease revoke's answer.
func printRevoked(c *cli.Context, out revokeOutput) error {
	t := table{header: []string{"DISPOSITION", "LEASE", "TTL", "VACATED"}}
	var vacated []string
	for _, v := range out.Vacated {
		vacated = append(vacated, v.Tenant+"/"+v.Task)
	}
	t.rows = [][]string{{string(ok), out.Lease, fmt.Sprintf("revoked (%ds were left)", out.TTLLeft), orDash(strings.Join(vacated, ","))}}
	return globalsOf(c).out.result(out, t)
}

// revokeLease revokes lease id: only a leasegate lease of this keyspace
// (Coordinator.RevokeOwnerLease), or any lease with force. A lease already
// gone is expired_owner; a revoke never sent is authority_unavailable; one
// whose answer was lost is outcome_unknown, and revoking again tells.
func revokeLease(ctx context.Context, co *coordinator.Coordinator, id int64, force bool) (revokeOutput, error) {
	var li coordinator.LeaseInfo
	var err error
	if force {
		li, err = forceRevoke(ctx, co, id)
	} else {
		li, err = co.RevokeOwnerLease(ctx, id)
	}
	if err != nil {
		return revokeOutput{}, notOwnerLeaseAdvice(err)
	}
	return revokeOutputOf(id, li), nil
}

// notOwnerLeaseHint is what to do about a lease revoke refused because the
// lease is not a leasegate lease: the library's refusal names no flag, and
// through --gateway there is no forced revoke at all.
const notOwnerLeaseHint = "check the lease ID ('leasegate lease list' shows leasegate's leases); " +
	"'leasegate lease revoke --force' with --endpoints revokes any lease, deleting every key on it " +
	"(the gateway revokes only leasegate leases)"

// advised is an error with the line's advice of its own (errorOutputOf).
type advised struct {
	error
	hint string
}

func (e advised) Unwrap() error { return e.error }
func (e advised) Hint() string  { return e.hint }

// notOwnerLeaseAdvice is err, a revoke's answer, with notOwnerLeaseHint
// when the lease was refused as not a leasegate lease (invalid_input: the
// command's own input was checked before).
func notOwnerLeaseAdvice(err error) error {
	if coordinator.DispositionOf(err) != coordinator.InvalidInput {
		return err
	}
	return advised{err, notOwnerLeaseHint}
}

// revokeOutputOf is the answer of revoking lease id, li as read right
// before the revoke.
func revokeOutputOf(id int64, li coordinator.LeaseInfo) revokeOutput {
	out := revokeOutput{Disposition: ok, Lease: coordinator.FormatLeaseID(id), TTLLeft: li.TTLLeft, Vacated: []taskRef{}}
	for _, t := range li.Tasks {
		out.Vacated = append(out.Vacated, taskRef{t.Tenant, t.Task})
	}
	return out
}

// forceRevoke revokes lease id whatever it carries, after reading which
// tasks of this keyspace it holds (a read that fails was never a write).
func forceRevoke(ctx context.Context, co *coordinator.Coordinator, id int64) (coordinator.LeaseInfo, error) {
	li, err := co.Lease(ctx, id)
	var e *coordinator.Error
	if errors.As(err, &e) {
		e.Op = "lease revoke"
	}
	if err != nil {
		return coordinator.LeaseInfo{}, err
	}
	return li, co.RevokeLease(ctx, id)
}
