package ledger

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

func decodeRecord(kvs []*mvccpb.KeyValue) (Record, bool, error) {
	if len(kvs) == 0 {
		return Record{}, false, nil
	}
	var rec Record
	if err := json.Unmarshal(kvs[0].Value, &rec); err != nil {
		return Record{}, false, store.NewError(coordinator.CorruptRecord, "ledger", "", "", fmt.Sprintf("record %s is unreadable", kvs[0].Key), err)
	}
	rec.Revision = kvs[0].ModRevision
	return rec, true, nil
}

func decodeJournal(kvs []*mvccpb.KeyValue) ([]Transition, error) {
	out := make([]Transition, 0, len(kvs))
	for _, kv := range kvs {
		var t Transition
		if err := json.Unmarshal(kv.Value, &t); err != nil {
			return nil, store.NewError(coordinator.CorruptRecord, "ledger", "", "", fmt.Sprintf("journal entry %s is unreadable", kv.Key), err)
		}
		t.Revision = kv.CreateRevision
		out = append(out, t)
	}
	return out, nil
}
