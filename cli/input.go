package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// The flags several commands share, and the checks that run on them before
// any I/O.

func tenantFlag(usage string) cli.Flag { return &cli.StringFlag{Name: "tenant", Usage: usage} }
func taskFlag(usage string) cli.Flag   { return &cli.StringFlag{Name: "task", Usage: usage} }
func ownerFlag() cli.Flag {
	return &cli.StringFlag{Name: "owner", Usage: "owner label of the grant (the worker's identity)"}
}
func ttlFlag(def time.Duration) cli.Flag {
	return &cli.DurationFlag{Name: "ttl", Usage: "lease TTL: a duration in whole seconds, with its unit (30s, 5m), at most 24h", Value: def}
}
func grantFlag() cli.Flag {
	return &cli.StringFlag{Name: "grant", Usage: "grant file, or - for stdin: a bare grant or claim's JSON output", TakesFile: true}
}

// badFlagValue is urfave's message for a flag value that does not parse.
var badFlagValue = regexp.MustCompile(`invalid value "([^"]*)" for flag -([\w-]+)`)

// durationHint says what a duration flag wants when it was given a bare
// number (--ttl 10): urfave says only "parse error".
func durationHint(c *cli.Context, err error) string {
	m := badFlagValue.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	value, name := m[1], m[2]
	if _, nerr := strconv.ParseFloat(value, 64); nerr != nil {
		return ""
	}
	flags := c.App.Flags
	if c.Command != nil {
		flags = append(flags, c.Command.Flags...)
	}
	for _, f := range flags {
		if _, isDuration := f.(*cli.DurationFlag); isDuration && hasName(f, name) {
			return fmt.Sprintf(" (a duration needs a unit: --%s %ss)", name, value)
		}
	}
	return ""
}

func hasName(f cli.Flag, name string) bool {
	for _, n := range f.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// labels reads required label flags (tenant, task, owner, operation) in
// order and checks each is a label.
func labels(c *cli.Context, names ...string) ([]string, error) {
	out := make([]string, len(names))
	for i, n := range names {
		if !c.IsSet(n) {
			return nil, store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("--%s is required", n), nil)
		}
		v := c.String(n)
		if err := coordinator.CheckLabel(n, v); err != nil {
			return nil, store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("--%s: %v", n, err), nil)
		}
		out[i] = v
	}
	return out, nil
}

// ttlOf checks --ttl the way NewSession will, but before the CLI connects:
// etcd counts leases in whole seconds.
func ttlOf(c *cli.Context) (time.Duration, error) {
	ttl := c.Duration("ttl")
	if err := coordinator.CheckTTL(ttl); err != nil {
		return 0, store.NewError(store.InvalidInput, commandName(c), "", "", fmt.Sprintf("--ttl: %v", err), nil)
	}
	return ttl, nil
}

// maxGrantFile bounds what --grant reads: a grant is a few hundred bytes.
const maxGrantFile = 64 << 10

// grantOf reads and checks the grant named by --grant: a file, or - for the
// app's reader. It holds either a bare grant or claim's output
// ({"disposition":"granted","grant":{…}}).
func grantOf(c *cli.Context) (coordinator.Grant, error) {
	op := commandName(c)
	name := c.String("grant")
	if name == "" {
		return coordinator.Grant{}, store.NewError(store.InvalidInput, op, "", "", "--grant is required (a file, or - for stdin)", nil)
	}
	var r io.Reader
	if name == "-" {
		r = c.App.Reader
	} else {
		f, err := os.Open(name)
		if err != nil {
			return coordinator.Grant{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--grant: %v", err), nil)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxGrantFile+1))
	if err != nil {
		return coordinator.Grant{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--grant %s: %v", name, err), nil)
	}
	if len(data) > maxGrantFile {
		return coordinator.Grant{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--grant %s is larger than %d bytes: not a grant", name, maxGrantFile), nil)
	}
	g, err := parseGrant(data)
	if err != nil {
		return coordinator.Grant{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--grant %s: %v", name, err), nil)
	}
	return g, nil
}

// parseGrant accepts one JSON object: a bare grant, or claim's output.
// Unknown fields are refused, so a typo cannot leave a field zero.
func parseGrant(data []byte) (coordinator.Grant, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] != '{' {
		// A table (claim without -o json) or anything else that is no JSON.
		return coordinator.Grant{}, fmt.Errorf("not a grant: it holds no JSON object (a table?); save claim's output with -o json: 'leasegate -o json claim ... > grant.json'")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return coordinator.Grant{}, fmt.Errorf("not a JSON object: %v", err)
	}
	raw := data
	if inner, wrapped := probe["grant"]; wrapped {
		var d coordinator.Disposition
		if err := json.Unmarshal(probe["disposition"], &d); err != nil || d != coordinator.Granted {
			return coordinator.Grant{}, fmt.Errorf("holds a %q answer, not a granted claim", d)
		}
		raw = inner
	}
	var g coordinator.Grant
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return coordinator.Grant{}, fmt.Errorf("not a grant: %v", err)
	}
	if err := g.Validate(); err != nil {
		return coordinator.Grant{}, err
	}
	return g, nil
}
