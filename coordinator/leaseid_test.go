package coordinator_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// big is a lease ID above 2^53: as a JSON number, jq and JavaScript round it.
const big = int64(0x694d7b1f3c2a0b11)

func TestGrantJSONLeaseIsHex(t *testing.T) {
	t.Parallel()
	g := coordinator.Grant{Realm: "r", Tenant: "t", Task: "k", Owner: "o", Epoch: 7, Lease: big}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"lease":"694d7b1f3c2a0b11"`) {
		t.Fatalf("grant JSON %s; want the lease as etcdctl's hex string", b)
	}
	for name, in := range map[string]string{
		"hex string":  string(b),
		"0x string":   `{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":7,"lease":"0x694d7b1f3c2a0b11"}`,
		"JSON number": `{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":7,"lease":7587856321272744721}`,
	} {
		var back coordinator.Grant
		if err := json.Unmarshal([]byte(in), &back); err != nil || back != g {
			t.Fatalf("%s: %+v %v; want %+v", name, back, err, g)
		}
	}
	for name, in := range map[string]string{
		"not hex":       `{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":7,"lease":"xyz"}`,
		"float":         `{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":7,"lease":1.5}`,
		"unknown field": `{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":7,"lease":"01","lease_id":1}`,
		"over 63 bits":  `{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":7,"lease":"ffffffffffffffff"}`,
	} {
		var back coordinator.Grant
		if err := json.Unmarshal([]byte(in), &back); err == nil {
			t.Fatalf("%s: accepted as %+v", name, back)
		}
	}
	o, err := json.Marshal(coordinator.Ownership{Tenant: "t", Task: "k", Owner: "o", Lease: big})
	if err != nil || !strings.Contains(string(o), `"lease":"694d7b1f3c2a0b11"`) || !strings.Contains(string(o), `"stale":false`) {
		t.Fatalf("ownership JSON %s %v", o, err)
	}
	var back coordinator.Ownership
	if err := json.Unmarshal(o, &back); err != nil || back.Lease != big {
		t.Fatalf("ownership round trip: %+v %v", back, err)
	}
	li, err := json.Marshal(coordinator.LeaseInfo{ID: big})
	if err != nil || !strings.Contains(string(li), `"id":"694d7b1f3c2a0b11"`) {
		t.Fatalf("lease info JSON %s %v", li, err)
	}
}

func TestCheckTTL(t *testing.T) {
	t.Parallel()
	for _, ttl := range []time.Duration{time.Second, 10 * time.Second, coordinator.MaxTTL} {
		if err := coordinator.CheckTTL(ttl); err != nil {
			t.Errorf("CheckTTL(%v): %v", ttl, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, 1500 * time.Millisecond, coordinator.MaxTTL + time.Second, 10 * time.Hour * 24} {
		if err := coordinator.CheckTTL(ttl); err == nil {
			t.Errorf("CheckTTL(%v) accepted", ttl)
		}
	}
	if err := coordinator.CheckTTL(25 * time.Hour); err == nil || !strings.Contains(err.Error(), "24h") {
		t.Fatalf("CheckTTL(25h): %v; want the maximum named", err)
	}
}

// TestLogsWriteLeaseIDsInHex: every log entry that names a lease names it
// as etcdctl and the CLI print it, 16 hex digits, at info as at debug.
func TestLogsWriteLeaseIDsInHex(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	core, logs := observer.New(zapcore.DebugLevel)
	c := lgtest.Coordinator(t, cl, coordinator.WithLogger(zap.New(core)))
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "k")
	if err := c.Release(lgtest.Ctx(t), g); err != nil {
		t.Fatal(err)
	}
	want := coordinator.FormatLeaseID(s.Lease())
	named := 0
	for _, e := range logs.All() {
		v, ok := e.ContextMap()["lease-id"]
		if !ok {
			continue
		}
		named++
		if v != want {
			t.Errorf("%q logs lease-id %v (%T), want %q", e.Message, v, v, want)
		}
	}
	if named < 2 {
		t.Fatalf("%d log entries name the lease, want the session's and the release's at least", named)
	}
}
