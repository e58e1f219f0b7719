package incident_test

import (
	"os"
	"testing"

	"github.com/leasegate/leasegate/temporal/incident"
)

// TestMain is also worker A's main: the replay starts this test binary
// again as a worker process (incident.RunWorkerFromEnv).
func TestMain(m *testing.M) {
	incident.RunWorkerFromEnv()
	os.Exit(m.Run())
}
