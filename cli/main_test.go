package cli_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/lgtest"
)

// shared is the cluster most tests run on: each test has its own --prefix,
// so its own realm and keys, and tests run in parallel on it.
var shared *embedtest.Cluster

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "leasegate-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared, err = embedtest.Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	shared.Close()
	if code == 0 {
		if err := goleak.Find(lgtest.LeakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}
