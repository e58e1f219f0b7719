// Command retentionsoak measures that retention keeps a keyspace bounded:
// workers claim, commit and release on a fixed set of tasks (half of them
// idle at a time, so fences go idle and come back), while a collector runs
// every -interval with a -window retention window and etcd's history is
// compacted after each run. It prints the key count and etcd's DB size
// after every collection and the maxima at the end.
//
//	go run ./tools/retentionsoak -ops 100000
//	go run ./tools/retentionsoak -ops 100000 -retention=false   # the same load without retention
//
// It is not part of `make test`; `make soak-retention` runs it. The figures
// are in docs/reliability.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/retention"
)

func main() {
	ops := flag.Int("ops", 100_000, "commits to make in total")
	workers := flag.Int("workers", 8, "concurrent workers, each with its own session and tasks")
	tasks := flag.Int("tasks", 32, "tasks per worker (half of them active at a time)")
	perClaim := flag.Int("commits-per-claim", 20, "commits under one claim before it is released")
	phase := flag.Duration("phase", 5*time.Second, "how long one half of the tasks stays active (longer than window+interval, so idle fences are collected)")
	window := flag.Duration("window", 2*time.Second, "retention window")
	interval := flag.Duration("interval", time.Second, "time between collections")
	useRetention := flag.Bool("retention", true, "run the collector (false: the same load, nothing collected)")
	flag.Parse()
	if err := run(*ops, *workers, *tasks, *perClaim, *phase, *window, *interval, *useRetention); err != nil {
		fmt.Fprintln(os.Stderr, "retentionsoak:", err)
		os.Exit(1)
	}
}

type sample struct {
	keys, dbSize, dbInUse int64
}

func run(ops, workers, tasks, perClaim int, phase, window, interval time.Duration, useRetention bool) error {
	dir, err := os.MkdirTemp("", "retentionsoak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cl, err := embedtest.Start(dir)
	if err != nil {
		return err
	}
	defer cl.Close()
	cli, err := cl.NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := coordinator.New(ctx, cli)
	if err != nil {
		return err
	}
	col, err := retention.New(c, retention.WithWindow(window))
	if err != nil {
		return err
	}

	start := time.Now()
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if err := worker(ctx, c, w, tasks, perClaim, phase, start, ops, &done); err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
				cancel()
			}
		}(w)
	}

	var mu sync.Mutex
	var samples []sample
	var deleted, kept int
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if useRetention {
				_, r, err := col.Run(ctx)
				if err != nil {
					errs <- fmt.Errorf("collector: %w", err)
					cancel()
					return
				}
				mu.Lock()
				deleted, kept = deleted+len(r.Deleted), kept+len(r.Kept)
				mu.Unlock()
			}
			s, err := measure(ctx, cli, c.Keys().Prefix())
			if err != nil {
				errs <- err
				cancel()
				return
			}
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
			fmt.Printf("t=%5.1fs commits=%6d keys=%6d db=%8d in-use=%8d\n",
				time.Since(start).Seconds(), done.Load(), s.keys, s.dbSize, s.dbInUse)
		}
	}()
	wg.Wait()
	close(stop)
	<-collected
	close(errs)
	for err := range errs {
		return err
	}
	elapsed := time.Since(start)
	final, err := measure(ctx, cli, c.Keys().Prefix())
	if err != nil {
		return err
	}
	var peak sample
	for _, s := range append(samples, final) {
		peak.keys, peak.dbSize, peak.dbInUse = max(peak.keys, s.keys), max(peak.dbSize, s.dbSize), max(peak.dbInUse, s.dbInUse)
	}
	fmt.Printf("\nretention=%v window=%v interval=%v workers=%d tasks=%d commits=%d in %v (%.0f/s)\n",
		useRetention, window, interval, workers, workers*tasks, min(done.Load(), int64(ops)), elapsed.Round(time.Second), float64(min(done.Load(), int64(ops)))/elapsed.Seconds())
	fmt.Printf("collected %d keys (%d kept by their guards)\n", deleted, kept)
	fmt.Printf("keys under the prefix: final %d, peak %d\n", final.keys, peak.keys)
	fmt.Printf("etcd DB size: final %d B, peak %d B (in use: final %d B, peak %d B)\n", final.dbSize, peak.dbSize, final.dbInUse, peak.dbInUse)
	return nil
}

// measure counts the keys under prefix, compacts etcd's history to now (as
// etcd's auto-compaction would) and reads the DB size.
func measure(ctx context.Context, cli *clientv3.Client, prefix string) (sample, error) {
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return sample{}, err
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return sample{}, err
	}
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		return sample{}, err
	}
	return sample{keys: resp.Count, dbSize: st.DbSize, dbInUse: st.DbSizeInUse}, nil
}

// worker claims its tasks of the active half in turn, commits perClaim
// times under each claim, and releases.
func worker(ctx context.Context, c *coordinator.Coordinator, w, tasks, perClaim int, phase time.Duration, start time.Time, ops int, done *atomic.Int64) error {
	s, err := c.NewSession(ctx, fmt.Sprintf("worker-%d", w), 10*time.Second)
	if err != nil {
		return err
	}
	defer s.Close(context.Background())
	versions := make([]int64, tasks)
	for n := 0; ; n++ {
		half := int(time.Since(start)/phase) % 2
		i := half*(tasks/2) + n%(tasks/2)
		task := fmt.Sprintf("w%d-t%d", w, i)
		g, err := s.Claim(ctx, "soak", task)
		if err != nil {
			return err
		}
		for k := 0; k < perClaim; k++ {
			if done.Add(1) > int64(ops) {
				return c.Release(ctx, g)
			}
			in := fencedtxn.Intent{Tenant: "soak", Task: task, Operation: fmt.Sprintf("op-%d-%d-%d", w, n, k),
				Value: []byte("v"), ExpectedVersion: versions[i]}
			if _, err := fencedtxn.Commit(ctx, c, g, in); err != nil {
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
			versions[i]++
		}
		if err := c.Release(ctx, g); err != nil {
			return err
		}
	}
}
