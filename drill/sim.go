package drill

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// sim is one trial's simulated world: a virtual clock, the actors (workers)
// that run in it, and the world's own timed events (a promotion completing,
// a DNS change going INSYNC, an operator's edit, a lease expiring).
//
// Actors are goroutines, but only one of them — or the scheduler — runs at
// any moment: an actor runs until it sleeps (advancing its own wake time)
// or ends, and the scheduler then picks the next actor or event with the
// earliest time, world events first, then actors in the order they were
// added. That makes a trial deterministic for a given seed: the same calls
// reach etcd and the providers in the same order. What etcd answers with
// (revisions, lease ids) differs from run to run; the trajectory names
// epochs by their order of appearance so that replays compare equal.
type sim struct {
	now    time.Duration
	rng    *rand.Rand
	traj   *Trajectory
	actors []*actor
	events []*worldEvent
	back   chan struct{} // an actor yielded or ended
	seq    int
	// running is the actor that runs now (set by run as it resumes one).
	running *actor
	// script, when set, fixes the timings of a named scenario (scenario.go).
	script *script
}

type worldEvent struct {
	at   time.Duration
	seq  int
	name string
	fn   func()
}

// actor is one simulated process.
type actor struct {
	s      *sim
	name   string
	wake   time.Duration
	resume chan struct{}
	done   bool
	killed bool // stopped by a fault: it never runs again
}

// errKilled unwinds a killed actor's goroutine.
type errKilled struct{ name string }

func (e errKilled) Error() string { return fmt.Sprintf("drill: actor %s was killed", e.name) }

func newSim(rng *rand.Rand, traj *Trajectory) *sim {
	return &sim{rng: rng, traj: traj, back: make(chan struct{})}
}

// at schedules a world event at time t (not before now).
func (s *sim) at(t time.Duration, name string, fn func()) {
	if t < s.now {
		t = s.now
	}
	s.seq++
	s.events = append(s.events, &worldEvent{at: t, seq: s.seq, name: name, fn: fn})
}

// spawn adds an actor that starts at time t and runs body.
func (s *sim) spawn(name string, t time.Duration, body func(a *actor)) *actor {
	a := &actor{s: s, name: name, wake: max(t, s.now), resume: make(chan struct{})}
	s.actors = append(s.actors, a)
	go func() {
		<-a.resume
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(errKilled); !ok {
					panic(r)
				}
			}
			a.done = true
			s.back <- struct{}{}
		}()
		if !a.killed {
			body(a)
		}
	}()
	return a
}

// run drives the trial until no actor is left and no event is due before
// limit. Events past limit are dropped (the world stops there).
func (s *sim) run(limit time.Duration) {
	for {
		var next *worldEvent
		for _, e := range s.events {
			if next == nil || e.at < next.at || (e.at == next.at && e.seq < next.seq) {
				next = e
			}
		}
		var who *actor
		for _, a := range s.actors {
			if !a.done && (who == nil || a.wake < who.wake) {
				who = a
			}
		}
		switch {
		case next != nil && (who == nil || next.at <= who.wake) && next.at <= limit:
			s.now = next.at
			s.removeEvent(next)
			next.fn()
		case who != nil && who.wake <= limit:
			s.now = who.wake
			s.running = who
			who.resume <- struct{}{}
			<-s.back
		case who != nil:
			// Past the limit: actors still alive are stopped where they are.
			for _, a := range s.actors {
				if !a.done {
					a.killed = true
					s.running = a
					a.resume <- struct{}{}
					<-s.back
				}
			}
			return
		default:
			return
		}
	}
}

func (s *sim) removeEvent(e *worldEvent) {
	for i, x := range s.events {
		if x == e {
			s.events = append(s.events[:i], s.events[i+1:]...)
			return
		}
	}
}

// between draws a duration uniformly from [lo, hi].
func (s *sim) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

// sleep lets the world run for d before the actor continues.
func (a *actor) sleep(d time.Duration) {
	a.wake = a.s.now + d
	a.s.back <- struct{}{}
	<-a.resume
	if a.killed {
		panic(errKilled{a.name})
	}
}

// forever is the wake time of an actor that waits for another (wait).
const forever = time.Duration(1<<63 - 1)

// wait lets the world run until another actor wakes this one (wakeNow).
func (a *actor) wait() { a.sleep(forever - a.s.now) }

// wakeNow makes a waiting actor runnable at the current time.
func (a *actor) wakeNow() {
	if a.wake > a.s.now {
		a.wake = a.s.now
	}
}

// pause is sleep for code that runs on the actor's behalf outside its own
// goroutine (a gateway's handler of the actor's call): a killed actor is
// an error there, never a panic that would unwind the wrong goroutine.
func (a *actor) pause(d time.Duration) error {
	if a.killed {
		return errKilled{a.name}
	}
	a.wake = a.s.now + d
	a.s.back <- struct{}{}
	<-a.resume
	if a.killed {
		return errKilled{a.name}
	}
	return nil
}

// step is the time one action of a worker takes.
func (a *actor) step() { a.sleep(a.s.between(200*time.Millisecond, 1500*time.Millisecond)) }

// kill stops the actor at its next sleep; called from the actor itself it
// stops it now.
func (a *actor) kill() {
	a.killed = true
	panic(errKilled{a.name})
}
