package core

import clientv3 "go.etcd.io/etcd/client/v3"

// A coordinator keeps, per grant, the guard's compares and reads (Guard,
// GuardReads) that every commit and ledger transition of that grant puts in
// its Txn: a worker commits and transitions many times under one grant, and
// building them — six keys, five compares, three reads — was half of a
// commit's client-side work and most of a transition's Txn building
// besides its records. An entry is exactly what Guard and GuardReads return
// for its grant (every field of the Grant is the key, and the cache is the
// coordinator's own, whose keyspace never changes), handed out as fresh
// slices over shared keys and values that nothing modifies. It is cleared
// when it holds maxGuards grants, so its memory is bounded.

const maxGuards = 4096

type guarded struct {
	cmps  []clientv3.Cmp
	reads []clientv3.Op
}

// Guarded is g's Guard compares and GuardReads reads on c, each a fresh
// slice with room for extra more (the caller's own compares and reads).
func Guarded[G comparable, S any](c lender[G, S], g G, extra int) ([]clientv3.Cmp, []clientv3.Op) {
	l := c.lent()
	l.mu.Lock()
	e, ok := l.guards[g]
	l.mu.Unlock()
	if !ok {
		e = guarded{l.p.Guard(g), l.p.GuardReads(g)}
		l.mu.Lock()
		if l.guards == nil || len(l.guards) >= maxGuards {
			l.guards = map[G]guarded{}
		}
		l.guards[g] = e
		l.mu.Unlock()
	}
	cmps := append(make([]clientv3.Cmp, 0, len(e.cmps)+extra), e.cmps...)
	reads := append(make([]clientv3.Op, 0, len(e.reads)+extra), e.reads...)
	return cmps, reads
}
