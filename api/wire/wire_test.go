package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// zeroFields names the fields of v (a struct, through pointers and nested
// structs) left at their zero value: a value meant to fill every field
// shows which one a new field of the Go API lacks in the test.
func zeroFields(v reflect.Value, path string) []string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return []string{path}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || v.Type() == reflect.TypeOf(time.Time{}) {
		if v.IsZero() {
			return []string{path}
		}
		return nil
	}
	var out []string
	for i := range v.NumField() {
		out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
	}
	return out
}

// Every field of a record, a lease and an origin survives the hop (to the
// API's message and back): a field the Go API gains and the API lacks
// fails here, before a --gateway answer silently drops it.
func TestValuesSurviveTheHop(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 2, 3, 4, time.UTC)
	ev := &ledger.Evidence{ProviderIDs: []string{"req-1"}, Detail: json.RawMessage(`"seen"`), At: at}
	rec := ledger.Record{Tenant: "acme", Task: "failover", Operation: "promote", State: ledger.Unknown,
		Effect:       ledger.Effect{Kind: "db.promote", Target: "db-b", Params: json.RawMessage(`{"a":1}`), Policy: "p7"},
		ParamsDigest: "pd", Approval: &ledger.Approval{Approver: "imani", ParamsDigest: "pd", PreconditionDigest: "wd", Policy: "p7", At: at, Note: "n"},
		ApprovalDigest: "ad", AuthorizedAt: at.Add(time.Second),
		Precondition: ledger.Observation{Digest: "wd", At: at, Detail: json.RawMessage(`{"writer":"db-a"}`)},
		Requires: []ledger.Requirement{{Effect: ledger.Effect{Kind: "dns.upsert", Target: "checkout", Params: json.RawMessage(`{"value":"db-b"}`), Policy: "p7"},
			Precondition: ledger.Observation{Digest: "rd", At: at, Detail: json.RawMessage(`{"value":"db-a"}`)}}},
		ProposedEpoch: 3, Epoch: 4, Owner: "w1", Attempts: 2, DispatchID: "d-1", DispatchLease: 0x694d7c7e0c1f4a02, DispatchedAt: at.Add(2 * time.Second), Evidence: ev,
		Answer: &ledger.Answer{DispatchID: "d-1", Epoch: 4, Owner: "w1", To: ledger.Confirmed, Reason: "r", Evidence: ev, At: at},
		Seq:    5, Revision: 9}
	if z := zeroFields(reflect.ValueOf(rec), "Record"); len(z) > 0 {
		t.Fatalf("the test leaves %v zero: fill them", z)
	}
	if got := wire.RecordFromProto(wire.RecordToProto(rec)); !reflect.DeepEqual(got, rec) {
		t.Fatalf("record:\n%+v\nbecame\n%+v", rec, got)
	}

	li := coordinator.LeaseInfo{ID: 0x694d7c7e0c1f4a01, Owner: "w1", GrantedTTL: 30, TTLLeft: 12,
		Tasks: []coordinator.LeaseTask{{Tenant: "acme", Task: "a", Epoch: 7, Stale: true}}, Revision: 11}
	if z := zeroFields(reflect.ValueOf(li), "LeaseInfo"); len(z) > 0 {
		t.Fatalf("the test leaves %v zero: fill them", z)
	}
	if got := wire.LeaseInfoFromProto(wire.LeaseInfoToProto(li)); !reflect.DeepEqual(got, li) {
		t.Fatalf("lease:\n%+v\nbecame\n%+v", li, got)
	}

	o := &coordinator.Origin{Realm: "r", ClusterID: "c1", Revision: 4, RaftIndex: 5, At: at}
	if z := zeroFields(reflect.ValueOf(o), "Origin"); len(z) > 0 {
		t.Fatalf("the test leaves %v zero: fill them", z)
	}
	if got := wire.OriginFromProto(wire.OriginToProto(o)); !reflect.DeepEqual(got, o) {
		t.Fatalf("origin:\n%+v\nbecame\n%+v", o, got)
	}
}
