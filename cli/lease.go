package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
)

func leaseCommand() *cli.Command {
	return &cli.Command{
		Name:  "lease",
		Usage: "operate on etcd leases directly",
		Subcommands: []*cli.Command{{
			Name:  "revoke",
			Usage: "operator's forced expiry: revoke a lease and every owner key on it",
			Description: example(`Revokes the lease: etcd deletes every key attached to it at once, so every
task claimed on it is vacated and its grant is refused (expired_owner) from
then on; a 'leasegate run' holding it stops its child. --lease takes the
ID in hex as leasegate and etcdctl print it (or decimal, or 0x and hex);
--grant takes a grant file (or claim's output) and revokes its lease.`,
				"leasegate lease revoke --lease 694d7c7e0c1f4a01",
				"leasegate lease revoke --lease 7587883720139372801",
				"leasegate lease revoke --grant grant.json"),
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "lease", Usage: "lease ID: hex as printed (694d7c7e0c1f4a01), or decimal"},
				grantFlag(),
			},
			Action: leaseRevoke,
		}},
	}
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
	op := c.Command.FullName()
	var id int64
	switch {
	case c.IsSet("lease") && c.IsSet("grant"):
		return coordinator.Invalid(op, "give --lease or --grant, not both")
	case c.IsSet("grant"):
		g, err := grantOf(c)
		if err != nil {
			return err
		}
		id = g.Lease
	default:
		var err error
		if id, err = leaseID(c.String("lease")); err != nil {
			return coordinator.Invalid(op, "--lease: %v", err)
		}
	}
	var out revokeOutput
	err := withCoordinator(c, func(ctx context.Context, co *coordinator.Coordinator) (err error) {
		out, err = revokeLease(ctx, co, op, id)
		return err
	})
	if err != nil {
		return err
	}
	t := table{header: []string{"DISPOSITION", "LEASE", "TTL-LEFT", "VACATED"}}
	var vacated []string
	for _, v := range out.Vacated {
		vacated = append(vacated, v.Tenant+"/"+v.Task)
	}
	t.rows = [][]string{{string(ok), leaseHex(id), fmt.Sprintf("%ds", out.TTLLeft), orDash(strings.Join(vacated, ","))}}
	return globalsOf(c).out.result(out, t)
}

// revokeLease revokes lease id after reading which tasks of this keyspace
// it holds. A revoke never sent is authority_unavailable; one whose answer
// was lost is outcome_unknown, and revoking again tells.
func revokeLease(ctx context.Context, co *coordinator.Coordinator, op string, id int64) (revokeOutput, error) {
	// Read first: a read that fails was never a write (authority
	// unavailable), and it names the tasks the revocation will vacate.
	ttl, err := co.Client().TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
	if err != nil {
		return revokeOutput{}, &coordinator.Error{Disposition: coordinator.AuthorityUnavailable, Op: op, Detail: "reading the lease failed", Err: err}
	}
	if ttl.TTL < 0 {
		return revokeOutput{}, &coordinator.Error{Disposition: coordinator.ExpiredOwner, Op: op,
			Detail: fmt.Sprintf("lease %s not found: it already expired or was revoked", leaseHex(id))}
	}
	out := revokeOutput{Disposition: ok, Lease: leaseHex(id), TTLLeft: ttl.TTL, Vacated: []taskRef{}}
	for _, k := range ttl.Keys {
		if kind, tenant, task, isTask := co.Keys().ParseTask(string(k)); isTask && kind == "owner" {
			out.Vacated = append(out.Vacated, taskRef{tenant, task})
		}
	}
	if err := co.RevokeLease(ctx, id); err != nil {
		return revokeOutput{}, err
	}
	return out, nil
}

// leaseID parses a lease ID: hex as leasegate and etcdctl print it (16 hex
// digits, or any hex with 0x), or decimal as older grants carried it.
func leaseID(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("required")
	}
	var id uint64
	var err error
	lower := strings.ToLower(s)
	h, prefixed := strings.CutPrefix(lower, "0x")
	switch {
	case prefixed, len(s) == 16, strings.ContainsAny(lower, "abcdef"):
		id, err = strconv.ParseUint(h, 16, 63)
	default:
		id, err = strconv.ParseUint(s, 10, 63)
	}
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%q is not a lease ID (hex as printed, e.g. 694d7c7e0c1f4a01, or decimal)", s)
	}
	return int64(id), nil
}
