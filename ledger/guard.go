package ledger

import (
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/core"
)

// guards keeps, per grant, the guard's compares and reads
// (coordinator.Guard, core.GuardReads) that every transition of that grant puts
// in its Txn: a worker makes many transitions under one grant, and
// building them — six keys, five compares, three reads — was most of a
// transition's Txn building besides its records. An entry is exactly what
// Guard and GuardReads return for its grant (every field of the Grant is
// the key, and the ledger's coordinator, hence its keyspace, never
// changes), handed out as fresh slices over shared keys and values that
// nothing modifies. It is cleared when it holds maxGuards grants, so its
// memory is bounded.
type guards struct {
	mu sync.Mutex
	m  map[coordinator.Grant]guardEntry
}

type guardEntry struct {
	cmps  []clientv3.Cmp
	reads []clientv3.Op
}

const maxGuards = 4096

// guard returns g's compares and reads, each with room for one more (the
// record's compare, the record's read).
func (l *Ledger) guard(g coordinator.Grant) ([]clientv3.Cmp, []clientv3.Op) {
	h := &l.guards
	h.mu.Lock()
	e, ok := h.m[g]
	h.mu.Unlock()
	if !ok {
		e = guardEntry{l.c.Guard(g), core.GuardReads(l.c, g)}
		h.mu.Lock()
		if h.m == nil || len(h.m) >= maxGuards {
			h.m = map[coordinator.Grant]guardEntry{}
		}
		h.m[g] = e
		h.mu.Unlock()
	}
	return append(make([]clientv3.Cmp, 0, len(e.cmps)+1), e.cmps...),
		append(make([]clientv3.Op, 0, len(e.reads)+1), e.reads...)
}
