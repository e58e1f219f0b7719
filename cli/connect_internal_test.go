package cli

import (
	"bytes"
	"net"
	"strings"
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

// FuzzEndpoint: an accepted endpoint without a scheme is host:port.
func FuzzEndpoint(f *testing.F) {
	for _, s := range []string{"127.0.0.1:2379", "http://127.0.0.1:2379", "unix:///tmp/s", "https://", "ftp://x:1", "localhost", "[::1]:2379", "http://%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkEndpoint(s) != nil || strings.Contains(s, "://") {
			return
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			t.Fatalf("endpoint %q accepted: %v", s, err)
		}
	})
}
