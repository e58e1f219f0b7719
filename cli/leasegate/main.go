// Command leasegate is the operator tool of leasegate: see package cli, and
// docs/operations.md for the runbook.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/leasegate/leasegate/cli"
)

func main() {
	// SIGINT, SIGTERM and SIGHUP cancel the command's context: etcd shuts
	// down, watch ends, run stops its child and releases. Signals stay
	// caught until the command returns, so a second Ctrl-C cannot orphan
	// run's child.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := cli.New().RunContext(ctx, os.Args)
	stop()
	os.Exit(cli.ExitCode(err))
}
