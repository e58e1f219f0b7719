package store_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, lgtest.LeakOptions()...)
}
