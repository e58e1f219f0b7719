package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Progress is where a long run is. The first one (Done 0) states the plan
// and its expected length; then one comes after every step, and Line, when
// not empty, says what the cell that step finished measured.
type Progress struct {
	Done, Total int
	Expected    time.Duration // the first one only: about how long the run takes
	Line        string
}

// ErrInterrupted is the error of a run whose context ended before it
// finished (a signal, the caller giving up). The report returned with it
// holds every step finished until then, and says so in its Interrupted
// field; a step cut short is left out, never counted as a failure.
var ErrInterrupted = errors.New("interrupted")

// interrupted is ErrInterrupted with ctx's cause and how far the run got.
func interrupted(ctx context.Context, done, total int, what string) error {
	return fmt.Errorf("%w (%v) after %d of %d %s", ErrInterrupted, context.Cause(ctx), done, total, what)
}

// report calls f, if set.
func report(f func(Progress), p Progress) {
	if f != nil {
		f(p)
	}
}

// about rounds d for a plan line: to 10 ms under a second, to the second
// under a minute, else to ten seconds.
func about(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(10 * time.Millisecond)
	}
	if d < time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Second)
}
