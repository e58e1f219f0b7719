package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// shared is the cluster most tests run on: each test has its own --prefix,
// so its own realm and keys, and tests run in parallel on it.
var shared *embedtest.Cluster

// asBinary makes the test binary run as leasegate itself, for the few
// tests that need a real process (urfave's shell completion reads
// os.Args).
const asBinary = "LEASEGATE_CLI_TEST_AS_BINARY"

func TestMain(m *testing.M) {
	if os.Getenv(asBinary) == "1" { // as cli/leasegate's main does
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		err := cli.New().RunContext(ctx, os.Args)
		stop()
		os.Exit(cli.ExitCode(err))
	}
	if os.Getenv(asWorker) == "1" {
		os.Exit(workerMain())
	}
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
