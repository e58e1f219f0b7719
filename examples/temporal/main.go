// Command temporal replays seed 003's failover on a real Temporal server
// (in-process, SQLite) against leasegate's gateway with the simulated
// providers of `leasegate serve --dev`: first the naive coarse activity,
// then this module's shape. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.temporal.io/server/temporaltest"

	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/temporal/incident"
)

func main() {
	// Worker A is this program run again: it serves Temporal's activity
	// queue and stops itself (SIGSTOP) at the seed's moment.
	incident.RunWorkerFromEnv()

	shape := flag.String("shape", "both", "naive, fenced or both")
	flag.Parse()
	var shapes []string
	switch *shape {
	case "both":
		shapes = []string{incident.ShapeNaive, incident.ShapeFenced}
	case incident.ShapeNaive, incident.ShapeFenced:
		shapes = []string{*shape}
	default:
		fmt.Fprintf(os.Stderr, "temporal: --shape %q: want naive, fenced or both\n", *shape)
		os.Exit(2)
	}
	if err := run(shapes); err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
}

func run(shapes []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fmt.Println("starting a Temporal server in this process (SQLite, in memory)")
	ts := temporaltest.NewServer()
	defer ts.Stop()
	t := incident.Temporal{Client: ts.GetDefaultClient(), HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace()}
	for _, shape := range shapes {
		dir, err := os.MkdirTemp("", "leasegate-temporal-")
		if err != nil {
			return err
		}
		w, err := incident.StartWorld(dir)
		if err != nil {
			return err
		}
		fmt.Printf("\n%s: etcd and the gateway at %s (simulated providers: writer %s)\n", shape, w.URL, w.Provider.Writer())
		r, err := incident.Replay(ctx, w, t, shape, exe, nil, os.Stdout)
		w.Close()
		_ = os.RemoveAll(dir)
		if err != nil {
			return err
		}
		summarize(r)
	}
	return nil
}

func summarize(r incident.Report) {
	var promotions, traffic int
	for _, c := range r.Calls {
		switch c.Kind {
		case devprovider.KindPromote:
			promotions++
		case devprovider.KindDNS:
			traffic++
		}
	}
	fmt.Printf("%s: %d promotion(s) and %d traffic change(s) reached the providers; Temporal counted attempt %d; final writer %s, traffic → %s\n",
		r.Shape, promotions, traffic, r.PromoteAttempts, r.Writer, r.Traffic)
	if r.Shape == incident.ShapeFenced {
		fmt.Printf("%s: A's late call under epoch %d: %s\n", r.Shape, r.Late.Epoch, r.Late.Detail)
	}
}
