package retention_test

import (
	"context"
	"log"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/retention"
)

// A service schedules a collection well inside the window: here a 24-hour
// window (a retry gets its receipt for a day), collected hourly. Several
// replicas may run it at once; every deletion is guarded.
func ExampleCollector_Run() {
	var c *coordinator.Coordinator // the service's coordinator (coordinator.New)
	col, err := retention.New(c, retention.WithWindow(24*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for range time.Tick(time.Hour) {
		_, r, err := col.Run(ctx)
		if err != nil {
			log.Printf("retention: %v", err) // a hold (etcd unreachable, no_space): try again next hour
			continue
		}
		log.Printf("retention: deleted %d keys, %d kept by their guards", len(r.Deleted), len(r.Kept))
	}
}
