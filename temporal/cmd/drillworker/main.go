// Command drillworker is a Temporal-driven recovery worker that `leasegate
// drill --worker` can drill (package drillworker; docs/temporal.md,
// "Drilling a Temporal-driven worker").
//
//	drillworker host                 # a Temporal server (in-process, SQLite) and the workflow worker
//	LEASEGATE_TEMPORAL_ADDRESS=127.0.0.1:PORT LEASEGATE_TEMPORAL_NAMESPACE=NS leasegate drill --worker drillworker --trials 8
//
// Run without arguments, it is one drill instance: an activity worker
// process that reads the drill's contract from its environment, joins the
// trial's activity queue on the Temporal server at
// LEASEGATE_TEMPORAL_ADDRESS, starts (or attaches to) the trial's
// workflow, and exits 0 (done), 3 (held), 4 (fenced), 2 (it could not use
// what it was given) or 1 (failed).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/server/temporaltest"

	"github.com/leasegate/leasegate/temporal/drillworker"
)

func main() {
	if len(os.Args) > 1 {
		if os.Args[1] != "host" || len(os.Args) > 2 {
			fmt.Fprintln(os.Stderr, "usage: drillworker        (a drill instance: run by leasegate drill --worker)\n       drillworker host   (a Temporal server and the workflow worker, until interrupted)")
			os.Exit(drillworker.ExitUsage)
		}
		os.Exit(host())
	}
	os.Exit(drillworker.Main(os.Getenv, os.Stderr))
}

// host runs a Temporal server in this process (SQLite, in memory) and the
// drill's workflow worker on it until SIGINT or SIGTERM.
func host() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ts := temporaltest.NewServer()
	defer ts.Stop()
	w := drillworker.NewHost(ts.GetDefaultClient())
	if err := w.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "drillworker host:", err)
		return 1
	}
	defer w.Stop()
	fmt.Printf("Temporal at %s (namespace %s), the drill's workflow worker on it. In another shell:\n\n", ts.GetFrontendHostPort(), ts.GetDefaultNamespace())
	fmt.Printf("  %s=%s %s=%s leasegate drill --worker %s\n\n", drillworker.EnvTemporal, ts.GetFrontendHostPort(),
		drillworker.EnvNamespace, ts.GetDefaultNamespace(), os.Args[0])
	fmt.Println("Interrupt to stop.")
	<-ctx.Done()
	return 0
}
