package ledger

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Record reads one operation's record and its journal, in transition order,
// at one revision. A missing record has State "".
func (l *Ledger) Record(ctx context.Context, tenant, task, operation string) (Record, []Transition, error) {
	const op = "ops show"
	if err := coordinator.CheckTask(tenant, task); err != nil {
		return Record{}, nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := coordinator.CheckLabel("operation", operation); err != nil {
		return Record{}, nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	resp, err := store.Of(l.c).Txn(ctx, store.TxnRequest{Op: op, Tenant: tenant, Task: task, ReadOnly: true,
		Then: []clientv3.Op{
			clientv3.OpGet(store.Of(l.c).Keys().Effect(tenant, task, operation)),
			clientv3.OpGet(store.Of(l.c).Keys().JournalOperationPrefix(tenant, task, operation), clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
		}})
	if err != nil {
		return Record{}, nil, err
	}
	rec, found, err := decodeRecord(resp.Responses[0].GetResponseRange().GetKvs())
	if err != nil || !found {
		return Record{Tenant: tenant, Task: task, Operation: operation}, nil, err
	}
	js, err := decodeJournal(resp.Responses[1].GetResponseRange().GetKvs())
	return rec, js, err
}

// Journal reads every transition of a task's operations, in the order they
// happened (their revisions).
func (l *Ledger) Journal(ctx context.Context, tenant, task string) ([]Transition, error) {
	const op = "ops journal"
	if err := coordinator.CheckTask(tenant, task); err != nil {
		return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	resp, err := store.Of(l.c).Txn(ctx, store.TxnRequest{Op: op, Tenant: tenant, Task: task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(store.Of(l.c).Keys().JournalPrefix(tenant, task), clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))}})
	if err != nil {
		return nil, err
	}
	return decodeJournal(resp.Responses[0].GetResponseRange().GetKvs())
}

// List reads the records of a task (tenant and task), of a tenant (task
// ""), or of every tenant (both ""), optionally only those in state.
func (l *Ledger) List(ctx context.Context, tenant, task string, state State) ([]Record, error) {
	const op = "ops list"
	k := store.Of(l.c).Keys()
	prefix := k.TaskPrefix(store.KindEffects, "")
	switch {
	case task != "":
		if err := coordinator.CheckTask(tenant, task); err != nil {
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
		prefix = k.EffectPrefix(tenant, task)
	case tenant != "":
		if err := coordinator.CheckLabel("tenant", tenant); err != nil {
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
		prefix = k.TaskPrefix(store.KindEffects, tenant)
	}
	if state != "" {
		if _, err := ParseState(string(state)); err != nil {
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	resp, err := store.Of(l.c).Txn(ctx, store.TxnRequest{Op: op, Tenant: tenant, Task: task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(prefix, clientv3.WithPrefix())}})
	if err != nil {
		return nil, err
	}
	var out []Record
	count := map[State]int{}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		rec, _, err := decodeRecord([]*mvccpb.KeyValue{kv})
		if err != nil {
			return nil, err
		}
		count[rec.State]++
		if state == "" || rec.State == state {
			out = append(out, rec)
		}
	}
	if tenant == "" && task == "" { // the whole ledger: the gauge of records by state
		for _, st := range allStates {
			l.metrics.recordsIn(st, count[st])
		}
	}
	return out, nil
}

// read is a linearizable read of one record of g's task (State "" if none).
func (l *Ledger) read(ctx context.Context, op string, g coordinator.Grant, operation string) (Record, error) {
	resp, err := store.Of(l.c).Txn(ctx, store.TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(store.Of(l.c).Keys().Effect(g.Tenant, g.Task, operation))}})
	if err != nil {
		return Record{}, err
	}
	rec, found, err := decodeRecord(resp.Responses[0].GetResponseRange().GetKvs())
	if !found && err == nil {
		rec = Record{Tenant: g.Tenant, Task: g.Task, Operation: operation}
	}
	if err == nil {
		l.hints.put(rec)
	}
	return rec, err
}

// hinted is the record of operation as this ledger last wrote or read it,
// if it was then in state want, or else the record read now. Use it only to
// build a transition, whose ModRevision compare makes a stale hint a
// refusal that reads the record as it is; never to answer a caller.
func (l *Ledger) hinted(ctx context.Context, op string, g coordinator.Grant, operation string, want State) (Record, error) {
	if rec, ok := l.hints.get(g.Tenant, g.Task, operation); ok && rec.State == want {
		return rec, nil
	}
	return l.read(ctx, op, g, operation)
}
