// Package robustness checks leasegate under real faults on three-member
// embedded etcd clusters: named fault cases, and histories of claims,
// commits, releases and reads from many concurrent clients, checked for
// linearizability with porcupine against a per-task model.
//
// Guarantees of the check: every recorded operation is one real call to
// coordinator or fencedtxn against real etcd; an operation whose outcome
// the caller could not know (outcome_unknown) is recorded as unknown —
// return time infinity, either applied or not — never dropped or guessed.
// The model (Model) is the DESIGN.md contract of one task: owner, epoch,
// whether the owner key is held, state version and value, and the recorded
// operations.
//
// Non-guarantees: the model lets a lease expire at any moment (it does not
// know the clocks), so it cannot tell a premature expiry from a timely one;
// it checks the safety that rests on the authority (fencing, exactly-once
// operations, epoch order, versions), not TTL arithmetic.
package robustness

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/leasegate/leasegate/coordinator"
)

// Kind is the kind of a recorded operation.
type Kind int

// The recorded operations.
const (
	Claim Kind = iota + 1
	Commit
	Release
	Read
)

func (k Kind) String() string {
	switch k {
	case Claim:
		return "claim"
	case Commit:
		return "commit"
	case Release:
		return "release"
	case Read:
		return "read"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Input is what a client asked.
type Input struct {
	Kind      Kind
	Task      string
	Owner     string // owner label and lease ("w3/694d..."): one session's identity
	Epoch     int64  // the grant's epoch (commit, release)
	Operation string // commit
	Value     string // commit
	Expected  int64  // commit: expected version
}

// Output is what the client learned. Unknown is the zero value's opposite:
// an Output with Unknown false and no Disposition never steps.
type Output struct {
	Unknown     bool
	Disposition coordinator.Disposition
	Epoch       int64  // claim: the granted epoch; busy: the holder's epoch
	Holder      string // busy: the holder's owner and lease
	Version     int64  // commit: committed version; read: the version read
	Value       string // read: the value read
	Revision    int64  // commit: the receipt's revision (checked against etcd by Workload.Verify)
	Detail      string // the error's text, for the visualization (never read by the model)
}

// State is one task as the model sees it. It is a comparable value.
type State struct {
	Owner      string // the owner of the newest grant ("" before any)
	Epoch      int64  // its epoch; if !EpochKnown, a lower bound
	EpochKnown bool
	Held       bool // the owner key of that grant exists
	Version    int64
	Value      string
	Ops        string // "|op=value@version|" for every recorded operation
}

// recorded is the value and committed version of op's record.
func (s State) recorded(op string) (value string, version int64, ok bool) {
	i := strings.Index(s.Ops, "|"+op+"=")
	if i < 0 {
		return "", 0, false
	}
	rest := s.Ops[i+len(op)+2:]
	rec := rest[:strings.IndexByte(rest, '|')]
	at := strings.LastIndexByte(rec, '@')
	version, err := strconv.ParseInt(rec[at+1:], 10, 64)
	if err != nil {
		panic(fmt.Sprintf("robustness: operation record %q", rec))
	}
	return rec[:at], version, true
}

// current is whether a grant (epoch, owner) is the newest one.
func (s State) current(epoch int64, owner string) bool {
	return s.EpochKnown && s.Epoch == epoch && s.Owner == owner
}

// Model is the porcupine model of a task, partitioned by task.
var Model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byTask := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			t := op.Input.(Input).Task
			if _, ok := byTask[t]; !ok {
				order = append(order, t)
			}
			byTask[t] = append(byTask[t], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, t := range order {
			out = append(out, byTask[t])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{State{Ops: "|"}} },
	Step: func(state, input, output interface{}) []interface{} {
		s, in, out := state.(State), input.(Input), output.(Output)
		var next []interface{}
		// A lease may expire at any moment: the step may start from the
		// state as it was or with the owner key gone.
		starts := []State{s}
		if s.Held {
			gone := s
			gone.Held = false
			starts = append(starts, gone)
		}
		for _, s := range starts {
			for _, n := range step(s, in, out) {
				next = append(next, n)
			}
		}
		return next
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(Input), output.(Output)
		res := string(out.Disposition)
		if out.Unknown {
			res = "unknown"
		}
		d := fmt.Sprintf("%s %s by %s@%d %s(v%d) -> %s e%d v%d", in.Kind, in.Task, in.Owner, in.Epoch, in.Operation, in.Expected, res, out.Epoch, out.Version)
		if out.Detail != "" {
			d += " (" + out.Detail + ")"
		}
		return d
	},
	DescribeState: func(state interface{}) string {
		s := state.(State)
		return fmt.Sprintf("owner=%s epoch=%d known=%v held=%v v%d ops=%s", s.Owner, s.Epoch, s.EpochKnown, s.Held, s.Version, s.Ops)
	},
}

// step is every state s can move to by in answered with out (none: the
// answer is impossible from s).
func step(s State, in Input, out Output) []State {
	if out.Unknown {
		// Applied or not: both are possible.
		applied := step(s, in, definite(s, in))
		return append([]State{s}, applied...)
	}
	d := out.Disposition
	if d == coordinator.AuthorityUnavailable {
		return []State{s} // never sent, or a read: nothing changed
	}
	switch in.Kind {
	case Claim:
		switch d {
		case coordinator.Granted:
			if !s.Held && out.Epoch > s.Epoch {
				return []State{{Owner: in.Owner, Epoch: out.Epoch, EpochKnown: true, Held: true, Version: s.Version, Value: s.Value, Ops: s.Ops}}
			}
			// A claim retried after a lost answer returns the same grant.
			if s.Held && s.Owner == in.Owner && (s.Epoch == out.Epoch || (!s.EpochKnown && out.Epoch > s.Epoch)) {
				s.Epoch, s.EpochKnown = out.Epoch, true
				return []State{s}
			}
		case coordinator.Busy:
			if s.Held && s.Owner == out.Holder && (s.Epoch == out.Epoch || (!s.EpochKnown && out.Epoch > s.Epoch)) {
				s.Epoch, s.EpochKnown = out.Epoch, true
				return []State{s}
			}
		case coordinator.ExpiredOwner:
			return []State{s} // the session's lease was gone: nothing written
		case granting:
			// An unknown claim that applied: some epoch above the last.
			if !s.Held {
				return []State{{Owner: in.Owner, Epoch: s.Epoch, Held: true, Version: s.Version, Value: s.Value, Ops: s.Ops}}
			}
		}
	case Commit, Release:
		// The guard is classified first: realm, then fence and owner.
		switch {
		case !s.current(in.Epoch, in.Owner):
			if d == coordinator.StaleOwner {
				return []State{s}
			}
			return nil
		case !s.Held:
			if d == coordinator.ExpiredOwner {
				return []State{s}
			}
			return nil
		}
		if in.Kind == Release {
			if d == coordinator.Released {
				s.Held = false
				return []State{s}
			}
			return nil
		}
		if v, version, ok := s.recorded(in.Operation); ok {
			// A retry is answered with the original receipt: its version.
			if (v == in.Value && d == coordinator.HistoricalRetry && out.Version == version) || (v != in.Value && d == coordinator.OperationConflict) {
				return []State{s}
			}
			return nil
		}
		if s.Version != in.Expected {
			if d == coordinator.VersionConflict {
				return []State{s}
			}
			return nil
		}
		if d == coordinator.Committed && out.Version == in.Expected+1 {
			s.Version, s.Value = in.Expected+1, in.Value
			s.Ops += fmt.Sprintf("%s=%s@%d|", in.Operation, in.Value, s.Version)
			return []State{s}
		}
	case Read:
		if d == coordinator.OK && out.Version == s.Version && out.Value == s.Value {
			return []State{s}
		}
	}
	return nil
}

// granting stands, inside the model only, for a claim that applied with an
// epoch nobody learned.
const granting coordinator.Disposition = "(applied, epoch unknown)"

// definite is the answer an unknown operation would have had, had it
// applied.
func definite(s State, in Input) Output {
	switch in.Kind {
	case Claim:
		return Output{Disposition: granting}
	case Commit:
		return Output{Disposition: coordinator.Committed, Version: in.Expected + 1}
	case Release:
		return Output{Disposition: coordinator.Released}
	}
	return Output{Disposition: coordinator.AuthorityUnavailable}
}
