package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// A procedure's path spelt otherwise — doubled or dotted segments, escapes,
// a detour through a service that needs no certificate — reaches no
// handler without the caller's certificate and role: a caller without one
// calling RotateRealm so is refused unauthenticated, redirected to the
// clean path or not found, and nothing is written.
func TestAPathSpeltOtherwiseIsNoWayAround(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	anon := w.httpClient("")
	anon.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, path := range []string{
		"//leasegate.v1.OperatorService/RotateRealm",
		"/leasegate.v1.OperatorService//RotateRealm",
		"/./leasegate.v1.OperatorService/RotateRealm",
		"/leasegate.v1.WorkerService/../leasegate.v1.OperatorService/RotateRealm",
		"/grpc.health.v1.Health/../leasegate.v1.OperatorService/RotateRealm",
		"/grpc.health.v1.Health/%2E%2E/leasegate.v1.OperatorService/RotateRealm",
		"/grpc.health.v1.Health%2F..%2Fleasegate.v1.OperatorService%2FRotateRealm",
		"/leasegate.v1.OperatorService%2FRotateRealm",
		"/leasegate.v1.Operator%53ervice/RotateRealm",
		"/metrics/../leasegate.v1.OperatorService/RotateRealm",
	} {
		t.Run(path, func(t *testing.T) {
			lgtest.WritesNothing(t, w.etcd, coordinator.DefaultPrefix, "a call without a certificate", func() {
				resp, err := anon.Post(r.ts.URL+path, "application/json", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				// Refused unauthenticated, redirected to the path itself, or
				// not found: never a handler's answer (its own checks would
				// refuse an unknown caller too, but after reading the call).
				switch resp.StatusCode {
				case http.StatusUnauthorized, http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusNotFound:
				default:
					t.Fatalf("HTTP %d without a certificate: a handler answered", resp.StatusCode)
				}
			})
		})
	}
}
