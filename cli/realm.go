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
			{
				Name:  "show",
				Usage: "print the realm every grant of this keyspace carries",
				Description: example(`Prints the realm UUID stored at <prefix>/realm (created on first use).`,
					"leasegate realm show"),
				Action: realmShow,
			},
			{
				Name:  "rotate",
				Usage: "write a new realm: every outstanding grant is refused from then on",
				Description: example(`Writes a new realm UUID. Every grant issued before it is refused with
authority_generation_mismatch, and every 'leasegate run' stops its child. Use it
after restoring etcd from a backup, or to cut off every owner at once. Owners
claim again to get grants of the new realm.`,
					"leasegate realm rotate"),
				Action: realmRotate,
			},
		},
	}
}

type realmOutput struct {
	Disposition   coordinator.Disposition `json:"disposition"`
	Realm         string                  `json:"realm"`
	PreviousRealm string                  `json:"previous_realm,omitempty"`
}

func realmShow(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	return withCoordinator(c, func(ctx context.Context, co *coordinator.Coordinator) error {
		r, err := co.CurrentRealm(ctx)
		if err != nil {
			return err
		}
		return globalsOf(c).out.result(realmOutput{Disposition: ok, Realm: r},
			table{header: []string{"REALM"}, rows: [][]string{{r}}})
	})
}

func realmRotate(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	return withCoordinator(c, func(ctx context.Context, co *coordinator.Coordinator) error {
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
