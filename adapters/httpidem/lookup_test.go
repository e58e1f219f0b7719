package httpidem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/leasegate/leasegate/adapters/httpidem"
	"github.com/leasegate/leasegate/ledger"
)

// A lookup whose first answer was applied but whose body carries no change
// id still confirms with a provider id: the key the service answered
// under.
func TestALookupWithoutAnIDConfirmsUnderItsKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":201,"response":{"record":"checkout"}}`))
	}))
	t.Cleanup(srv.Close)
	ad, err := httpidem.New(srv.URL+"/v1/records", httpidem.WithLookup(srv.URL+"/v1/changes?idempotency_key={key}"))
	if err != nil {
		t.Fatal(err)
	}
	out, ev, err := ad.Observe(context.Background(), ledger.Record{Operation: "traffic-db-b",
		Effect: ledger.Effect{Kind: "http.idempotent", Target: "checkout", Policy: "p"}})
	if err != nil || out != ledger.Applied {
		t.Fatalf("Observe: %v, %v", out, err)
	}
	if !slices.Contains(ev.ProviderIDs, "Idempotency-Key traffic-db-b") {
		t.Fatalf("provider ids %v: want the key the service answered under", ev.ProviderIDs)
	}
}
