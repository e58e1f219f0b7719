package coordinator_test

import (
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestAcquireSeesDeletionInItsWindows deletes the owner key inside each
// window of Acquire's wait, where its watch (from etcd's current revision,
// so that events come at once) cannot see the deletion: after the busy
// answer and before the watch exists, and after the watch exists and before
// the key is read again (with a write in between, so that the watch does not
// cover the busy answer's revision). The waiter must still be granted: a
// waiter that trusted its watch alone would wait until ctx's end.
func TestAcquireSeesDeletionInItsWindows(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	for _, step := range []string{"busy", "watching"} {
		t.Run(step, func(t *testing.T) {
			ctx := lgtest.Ctx(t)
			task := "window-" + step
			holder := lgtest.Session(t, c, "holder", 10*time.Second)
			old := lgtest.Claim(t, holder, "t", task)
			waiter := lgtest.Session(t, c, "waiter", 10*time.Second)
			var once sync.Once
			remove := coordinator.SetAcquireHook(c.Keys().Owner("t", task), func(at string) {
				if at == "busy" && step == "watching" {
					// Move etcd's revision past the busy answer's.
					if _, err := c.Client().Put(ctx, c.Keys().Prefix()+"/unrelated", "x"); err != nil {
						t.Error(err)
					}
				}
				if at == step {
					once.Do(func() {
						if err := c.RevokeLease(ctx, holder.Lease()); err != nil {
							t.Error(err)
						}
					})
				}
			})
			defer remove()
			g, err := waiter.Acquire(ctx, "t", task)
			if err != nil {
				t.Fatalf("Acquire with the owner key deleted %s: %v", step, err)
			}
			if g.Owner != "waiter" || g.Epoch <= old.Epoch {
				t.Fatalf("acquired %+v after %+v", g, old)
			}
		})
	}
}

// TestAcquireClaimsAgainWhenTheKeyChangedInItsWindow: the owner key is
// deleted and claimed again before Acquire's watch exists, so it exists when
// Acquire reads it again, but it is another key than the one found busy.
// Claimed by this same session, Acquire returns that grant at once; claimed
// by another, Acquire finds it busy again (its holder named) and waits for
// it, and is granted only once it is released. A waiter that looked only
// at the key's existence would wait on it for good in the first case and
// not learn the new holder in the second.
func TestAcquireClaimsAgainWhenTheKeyChangedInItsWindow(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)

	t.Run("by this session", func(t *testing.T) {
		ctx := lgtest.Ctx(t)
		holder := lgtest.Session(t, c, "holder", 10*time.Second)
		lgtest.Claim(t, holder, "t", "mine")
		waiter := lgtest.Session(t, c, "waiter", 10*time.Second)
		var once sync.Once
		var mine coordinator.Grant
		remove := coordinator.SetAcquireHook(c.Keys().Owner("t", "mine"), func(at string) {
			once.Do(func() {
				if err := c.RevokeLease(ctx, holder.Lease()); err != nil {
					t.Error(err)
				}
				var err error
				if mine, err = waiter.Claim(ctx, "t", "mine"); err != nil {
					t.Error(err)
				}
			})
		})
		defer remove()
		g, err := waiter.Acquire(ctx, "t", "mine")
		if err != nil || g != mine {
			t.Fatalf("Acquire = %+v, %v; want the grant claimed in its window, %+v", g, err, mine)
		}
	})

	t.Run("by another", func(t *testing.T) {
		ctx := lgtest.Ctx(t)
		holder := lgtest.Session(t, c, "holder", 10*time.Second)
		lgtest.Claim(t, holder, "t", "theirs")
		third := lgtest.Session(t, c, "third", 10*time.Second)
		waiter := lgtest.Session(t, c, "waiter", 10*time.Second)
		var theirs coordinator.Grant
		busy := 0
		again := make(chan struct{})
		remove := coordinator.SetAcquireHook(c.Keys().Owner("t", "theirs"), func(at string) {
			if at != "busy" {
				return
			}
			busy++ // Acquire's own goroutine: no lock needed
			switch busy {
			case 1:
				if err := c.RevokeLease(ctx, holder.Lease()); err != nil {
					t.Error(err)
				}
				var err error
				if theirs, err = third.Claim(ctx, "t", "theirs"); err != nil {
					t.Error(err)
				}
			case 2:
				close(again)
			}
		})
		defer remove()
		type result struct {
			g   coordinator.Grant
			err error
		}
		out := make(chan result, 1)
		go func() {
			g, err := waiter.Acquire(ctx, "t", "theirs")
			out <- result{g, err}
		}()
		lgtest.Wait(t, again, "Acquire to claim again and find the new holder")
		select {
		case r := <-out:
			t.Fatalf("Acquire returned %+v, %v while %+v holds the task", r.g, r.err, theirs)
		default:
		}
		if err := c.Release(ctx, theirs); err != nil {
			t.Fatal(err)
		}
		r := <-out
		if r.err != nil || r.g.Owner != "waiter" || r.g.Epoch <= theirs.Epoch {
			t.Fatalf("Acquire = %+v, %v after the release of %+v", r.g, r.err, theirs)
		}
	})
}
