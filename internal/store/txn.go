package store

import (
	"bytes"
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TxnRequest is one Txn run through Txn.
type TxnRequest struct {
	Op, Tenant, Task string // name the request in its errors and metrics
	If               []clientv3.Cmp
	Then, Else       []clientv3.Op
	ReadOnly         bool // no Then op writes: a failure is authority_unavailable
}

// Txn runs r. Its error, if any, is an *Error: authority_unavailable when
// the request never left this process (or was a read), outcome_unknown when
// it may have reached etcd, expired_owner when etcd named a lease gone;
// invalid_input, before any I/O, for a Txn etcd can never accept
// (checkTxn). Every Txn of leasegate's goes through it — the coordinator's
// own and those of fencedtxn, the ledger and retention — so their
// transport failures are classified alike.
func (s *Store) Txn(ctx context.Context, r TxnRequest) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	req := Request{Op: r.Op, Tenant: r.Tenant, Task: r.Task, Mutating: !r.ReadOnly}
	if err := s.checkTxn(r); err != nil {
		return nil, err
	}
	start := time.Now()
	err := s.Do(ctx, req, func(ctx context.Context) (err error) {
		resp, err = s.client.Txn(ctx).If(r.If...).Then(r.Then...).Else(r.Else...).Commit()
		return err
	})
	s.metrics.Txn(r.Op, time.Since(start))
	return resp, err
}

// A Txn etcd can never accept is refused before any I/O, as invalid_input,
// rather than sent to be refused (or, over gRPC's send limit, to fail as if
// the network had): more compares or ops in a branch than etcd's
// --max-txn-ops, a key written twice in one branch (etcd's "duplicate key"),
// a request over etcd's --max-request-bytes.

// opOverhead bounds the protobuf framing of one op (tags, lengths, lease):
// the size estimate errs on the large side.
const opOverhead = 32

// checkTxn reports why etcd would refuse r whatever its state.
func (s *Store) checkTxn(r TxnRequest) error {
	max := s.limits.MaxTxnOps
	for _, n := range []struct {
		what string
		n    int
	}{{"compares", len(r.If)}, {"then ops", len(r.Then)}, {"else ops", len(r.Else)}} {
		if n.n > max {
			return NewError(InvalidInput, r.Op, r.Tenant, r.Task,
				fmt.Sprintf("the Txn has %d %s, over etcd's max-txn-ops of %d (leasegate's own ops count too)", n.n, n.what, max), nil)
		}
	}
	for _, branch := range [][]clientv3.Op{r.Then, r.Else} {
		if key, dup := duplicateKey(branch); dup {
			return NewError(InvalidInput, r.Op, r.Tenant, r.Task,
				fmt.Sprintf("the Txn writes key %q twice (etcd refuses a duplicate key in one Txn)", key), nil)
		}
	}
	if n := txnSize(r); n > s.limits.MaxRequestBytes {
		return NewError(InvalidInput, r.Op, r.Tenant, r.Task,
			fmt.Sprintf("the request is about %d bytes, over etcd's max-request-bytes of %d", n, s.limits.MaxRequestBytes), nil)
	}
	return nil
}

// duplicateKey finds a key put twice, or put and deleted, in one branch —
// the overlap etcd's checkIntervals refuses.
func duplicateKey(ops []clientv3.Op) (string, bool) {
	puts := map[string]bool{}
	type span struct{ from, to []byte } // to == nil: the single key from
	var dels []span
	for _, op := range ops {
		switch {
		case op.IsPut():
			k := string(op.KeyBytes())
			if puts[k] {
				return k, true
			}
			puts[k] = true
		case op.IsDelete():
			dels = append(dels, span{op.KeyBytes(), op.RangeBytes()})
		}
	}
	for k := range puts {
		for _, d := range dels {
			key := []byte(k)
			switch {
			case len(d.to) == 0 && bytes.Equal(key, d.from):
				return k, true
			case len(d.to) > 0 && bytes.Compare(key, d.from) >= 0 && (bytes.Equal(d.to, []byte{0}) || bytes.Compare(key, d.to) < 0):
				return k, true
			}
		}
	}
	return "", false
}

// txnSize estimates, from above, the bytes of r on the wire.
func txnSize(r TxnRequest) int {
	n := opOverhead
	for i := range r.If {
		cmp := r.If[i].GetCompare()
		n += len(cmp.GetKey()) + len(cmp.GetRangeEnd()) + len(cmp.GetValue()) + opOverhead
	}
	for _, ops := range [][]clientv3.Op{r.Then, r.Else} {
		for _, op := range ops {
			n += len(op.KeyBytes()) + len(op.ValueBytes()) + len(op.RangeBytes()) + opOverhead
		}
	}
	return n
}
