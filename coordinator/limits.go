package coordinator

import (
	"bytes"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/internal/core"
)

// A Txn etcd can never accept is refused before any I/O, as invalid_input,
// rather than sent to be refused (or, over gRPC's send limit, to fail as if
// the network had): more compares or ops in a branch than etcd's
// --max-txn-ops, a key written twice in one branch (etcd's "duplicate key"),
// a request over etcd's --max-request-bytes.

// opOverhead bounds the protobuf framing of one op (tags, lengths, lease):
// the size estimate errs on the large side.
const opOverhead = 32

// checkTxn reports why etcd would refuse r whatever its state.
func (c *Coordinator) checkTxn(r core.TxnRequest) error {
	max := c.opts.maxTxnOps
	for _, n := range []struct {
		what string
		n    int
	}{{"compares", len(r.If)}, {"then ops", len(r.Then)}, {"else ops", len(r.Else)}} {
		if n.n > max {
			return newError(InvalidInput, r.Op, r.Tenant, r.Task,
				fmt.Sprintf("the Txn has %d %s, over etcd's max-txn-ops of %d (leasegate's own ops count too)", n.n, n.what, max), nil)
		}
	}
	for _, branch := range [][]clientv3.Op{r.Then, r.Else} {
		if key, dup := duplicateKey(branch); dup {
			return newError(InvalidInput, r.Op, r.Tenant, r.Task,
				fmt.Sprintf("the Txn writes key %q twice (etcd refuses a duplicate key in one Txn)", key), nil)
		}
	}
	if n := txnSize(r); n > c.opts.maxRequestBytes {
		return newError(InvalidInput, r.Op, r.Tenant, r.Task,
			fmt.Sprintf("the request is about %d bytes, over etcd's max-request-bytes of %d", n, c.opts.maxRequestBytes), nil)
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
func txnSize(r core.TxnRequest) int {
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
