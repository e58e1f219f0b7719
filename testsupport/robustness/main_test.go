package robustness_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// roleEnv names the role a re-executed test binary plays instead of
// running tests (process_test.go): a worker, or the leasegate CLI.
const roleEnv = "LEASEGATE_ROBUSTNESS_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "worker":
		os.Exit(worker())
	case "leasegate":
		os.Exit(leasegateMain())
	}
	goleak.VerifyTestMain(m, lgtest.LeakOptions()...)
}
