package fencedtxn

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// State is a task's protected state as its last commit left it.
type State struct {
	Tenant    string `json:"tenant"`
	Task      string `json:"task"`
	Value     []byte `json:"value"`     // as committed (Intent.Value); nil if never committed
	Version   int64  `json:"version"`   // commits so far; 0: never committed
	Operation string `json:"operation"` // the operation id of the last commit
	Epoch     int64  `json:"epoch"`     // the epoch of the grant that made the last commit
	Revision  int64  `json:"revision"`  // the etcd revision of the last commit (the state key's ModRevision); 0 if none
}

// Committed reports whether the task was ever committed to.
func (s State) Committed() bool { return s.Version > 0 }

// Get reads a task's protected state, linearizably. A task never committed
// to is a State with Version 0 and a nil error. A state key written by
// other means than Commit, which does not decode, is corrupt_record. It
// only reads: a failure is authority_unavailable, never outcome_unknown.
func Get(ctx context.Context, c *coordinator.Coordinator, tenant, task string) (State, error) {
	if c == nil {
		return State{}, store.NewError(store.InvalidInput, "get", "", "", "nil coordinator", nil)
	}
	if err := coordinator.CheckTask(tenant, task); err != nil {
		return State{}, store.NewError(store.InvalidInput, "get", "", "", fmt.Sprintf("%v", err), nil)
	}
	resp, err := store.Of(c).Txn(ctx, store.TxnRequest{Op: "get", Tenant: tenant, Task: task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(c.Keys().State(tenant, task))}})
	if err != nil {
		return State{}, err
	}
	st := State{Tenant: tenant, Task: task}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return st, nil
	}
	st.Revision = kvs[0].ModRevision
	var rec store.StateRecord
	if err := json.Unmarshal(kvs[0].Value, &rec); err != nil {
		// Written by other means than Commit: the one answer for stored
		// data that cannot be decoded.
		return State{}, store.NewError(coordinator.CorruptRecord, "get", tenant, task, fmt.Sprintf("state record %s is unreadable", kvs[0].Key), err)
	}
	st.Value, st.Version, st.Operation, st.Epoch = rec.Value, rec.Version, rec.Operation, rec.Epoch
	return st, nil
}
