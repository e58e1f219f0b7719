package cli

import (
	"bytes"
	"testing"

	"go.uber.org/zap/zapcore"
)

// TestEtcdClientLogsOnlyAtDebug: the etcd client's own error lines
// ("clientv3/retry_interceptor: getToken failed" on a run that succeeded)
// reach stderr at --log-level debug only.
func TestEtcdClientLogsOnlyAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level zapcore.Level
		shown bool
	}{{zapcore.DebugLevel, true}, {zapcore.InfoLevel, false}, {zapcore.WarnLevel, false}, {zapcore.ErrorLevel, false}} {
		var buf bytes.Buffer
		etcdClientLogger(newLogger(&buf, tc.level), tc.level).Error("clientv3/retry_interceptor: getToken failed")
		if shown := buf.Len() > 0; shown != tc.shown {
			t.Fatalf("--log-level %s: the etcd client's error shown %v, want %v: %q", tc.level, shown, tc.shown, buf.String())
		}
	}
}
