package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/gateway"
)

// The requests metric's method label takes the API's procedures only
// (gateway.OtherMethod for anything else): a caller without a certificate
// who sends a new path under a service's prefix for every request, or an
// authenticated one who sends an oversized request to one, must not grow
// the server's metrics.
func TestTheMethodLabelIsBoundedByTheAPI(t *testing.T) {
	w := newWorld(t)
	reg := prometheus.NewRegistry()
	r := w.replica(gateway.WithMetrics(reg, reg), gateway.WithMaxMessageBytes(4096))
	want := map[string]bool{gateway.OtherMethod: true}
	svcs := leasegatev1.File_leasegate_v1_leasegate_proto.Services()
	for i := range svcs.Len() {
		for j := range svcs.Get(i).Methods().Len() {
			want[string(svcs.Get(i).FullName())+"/"+string(svcs.Get(i).Methods().Get(j).Name())] = true
		}
	}
	post := func(hc *http.Client, path string, body string) int {
		t.Helper()
		resp, err := hc.Post(r.ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	anon, worker := w.httpClient(""), w.httpClient("worker-a")
	for i := range 20 {
		for _, svc := range []string{"WorkerService", "ApproverService", "OperatorService"} {
			if code := post(anon, fmt.Sprintf("/leasegate.v1.%s/Probe%d", svc, i), "{}"); code != http.StatusUnauthorized {
				t.Fatalf("a call without a certificate: HTTP %d", code)
			}
		}
		if code := post(worker, fmt.Sprintf("/leasegate.v1.WorkerService/Big%d", i), strings.Repeat(" ", 8192)); code != http.StatusBadRequest {
			t.Fatalf("an oversized call: HTTP %d", code)
		}
	}
	post(worker, "/leasegate.v1.WorkerService/GetState", `{"tenant":"tenant-a","task":"t"}`) // a procedure: its own label

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "leasegate_gateway_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	for m := range seen {
		if !want[m] {
			t.Errorf("method label %q is not a procedure of the API", m)
		}
	}
	if !seen[gateway.OtherMethod] || !seen["leasegate.v1.WorkerService/GetState"] {
		t.Fatalf("method labels %v: the refusals or the call were not counted", seen)
	}
}
