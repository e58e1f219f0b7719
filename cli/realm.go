package cli

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
)

func realmCommand() *cli.Command {
	return &cli.Command{
		Name:  "realm",
		Usage: "show or rotate the authority realm",
		Subcommands: []*cli.Command{
			realmShowCommand(),
			realmRotateCommand(),
		},
	}
}

func realmShowCommand() *cli.Command {
	return &cli.Command{
		Name:  "show",
		Usage: "print the realm every grant of this keyspace carries",
		Description: example(`Prints the realm UUID stored at <prefix>/realm. It only reads: a prefix without
a realm is no_keyspace (exit 7), and nothing is created (claim creates it). It
warns when the keyspace looks restored from an etcd snapshot since the realm
was minted: the etcd cluster answering is not the one recorded with the realm
(<prefix>/origin), or etcd's revision has run further ahead of its raft index
than it was then (a restore starts a new raft log). After a restore, old
grants may pass again and epochs be reused until 'leasegate realm rotate'.
The warnings are in the JSON's "warnings" field; the exit code stays 0.
With --gateway it needs an operator certificate of every tenant.`,
			"leasegate realm show",
			"leasegate -o json realm show | jq -e '.warnings | length == 0'"),
		Action: realmShow,
	}
}

func realmRotateCommand() *cli.Command {
	return &cli.Command{
		Name:  "rotate",
		Usage: "write a new realm: every outstanding grant is refused from then on",
		Description: example(`Writes a new realm UUID. Every grant issued before it is refused with
authority_generation_mismatch, and every 'leasegate run' stops its child. Use it
after restoring etcd from a backup, or to cut off every owner at once. Owners
claim again to get grants of the new realm. With --gateway it needs an
operator certificate of every tenant.`,
			"leasegate realm rotate"),
		Action: realmRotate,
	}
}

type realmOutput struct {
	Disposition   coordinator.Disposition `json:"disposition"`
	Realm         string                  `json:"realm"`
	PreviousRealm string                  `json:"previous_realm,omitempty"`
	// Origin and Warnings (realm show): where the realm was minted, and why
	// the keyspace looks restored since (coordinator.CheckOrigin).
	Origin   *coordinator.Origin `json:"origin,omitempty"`
	Warnings []string            `json:"warnings,omitempty"`
}

func realmShow(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if viaGateway(c) {
		return realmShowViaGateway(c)
	}
	return withCoordinator(c, reads, func(ctx context.Context, co *coordinator.Coordinator) error {
		chk, err := co.CheckOrigin(ctx)
		if err != nil {
			return err
		}
		return printRealm(c, chk)
	})
}

// printRealm prints realm show's answer.
func printRealm(c *cli.Context, chk coordinator.OriginCheck) error {
	t := table{header: []string{"REALM"}, rows: [][]string{{chk.Realm}}}
	for _, w := range chk.Warnings {
		t.rows = append(t.rows, []string{"WARNING: " + w})
	}
	return globalsOf(c).out.result(realmOutput{Disposition: ok, Realm: chk.Realm, Origin: chk.Origin, Warnings: chk.Warnings}, t)
}

func realmRotate(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if viaGateway(c) {
		return realmRotateViaGateway(c)
	}
	return withCoordinator(c, acts, func(ctx context.Context, co *coordinator.Coordinator) error {
		old, err := co.CurrentRealm(ctx)
		if err != nil {
			return err
		}
		r, err := co.RotateRealm(ctx)
		if err != nil {
			return err
		}
		return globalsOf(c).out.result(realmOutput{Disposition: ok, Realm: r, PreviousRealm: old},
			table{header: []string{"REALM", "PREVIOUS-REALM"}, rows: [][]string{{r, old}}})
	})
}
