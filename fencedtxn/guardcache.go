package fencedtxn

import (
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/core"
)

// guardCache keeps, per coordinator and grant, the guard's compares and
// reads (coordinator.Guard, GuardReads): a worker commits many times under
// one grant, and building them — six keys, five compares, three reads — was
// half of the commit's client-side work. The entry is exactly what Guard and
// GuardReads return for that grant (every field of the Grant is in the key,
// and a coordinator's keyspace never changes), handed out as fresh slices
// over shared, never-modified keys and values. It is cleared when it holds
// maxGuards grants, so its memory is bounded.
var guardCache = struct {
	sync.Mutex
	m map[guardKey]guardEntry
}{m: map[guardKey]guardEntry{}}

const maxGuards = 4096

type guardKey struct {
	c *coordinator.Coordinator
	g coordinator.Grant
}

type guardEntry struct {
	cmps  []clientv3.Cmp
	reads []clientv3.Op
}

// guard returns g's compares and reads with room for extra more of each.
func guard(c *coordinator.Coordinator, g coordinator.Grant, extra int) ([]clientv3.Cmp, []clientv3.Op) {
	k := guardKey{c, g}
	guardCache.Lock()
	e, ok := guardCache.m[k]
	guardCache.Unlock()
	if !ok {
		e = guardEntry{c.Guard(g), core.GuardReads(c, g)}
		guardCache.Lock()
		if len(guardCache.m) >= maxGuards {
			clear(guardCache.m)
		}
		guardCache.m[k] = e
		guardCache.Unlock()
	}
	cmps := append(make([]clientv3.Cmp, 0, len(e.cmps)+extra), e.cmps...)
	reads := append(make([]clientv3.Op, 0, len(e.reads)+extra), e.reads...)
	return cmps, reads
}
