package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/leasegate/leasegate/coordinator"
)

// Output formats of -o/--output.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// ok is the disposition of a command that reads or administers rather than
// acting under a grant (status, list, watch, lease revoke, realm, etcd).
const ok = coordinator.OK

// printer writes results to the app's writer: one JSON object per line
// with a "disposition" field, or a table for people.
type printer struct {
	w    io.Writer
	json bool
}

func newPrinter(w io.Writer, format string) (printer, error) {
	switch format {
	case formatTable:
		return printer{w: w}, nil
	case formatJSON:
		return printer{w: w, json: true}, nil
	}
	return printer{}, fmt.Errorf("-o %q: use %s or %s", format, formatTable, formatJSON)
}

// table is what a result looks like for people: a header and rows.
type table struct {
	header []string
	rows   [][]string
}

// result prints v as one JSON line, or t as an aligned table.
func (p printer) result(v any, t table) error {
	if p.json {
		return json.NewEncoder(p.w).Encode(v)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	if len(t.header) > 0 {
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	}
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// results prints several tables for people, after a header line and
// before a closing line (the drill's report); in JSON use result.
func (p printer) results(header, footer string, ts ...table) error {
	if _, err := fmt.Fprintln(p.w, header); err != nil {
		return err
	}
	for _, t := range ts {
		fmt.Fprintln(p.w)
		if err := p.result(nil, t); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(p.w, "\n%s\n", footer)
	return err
}

// stream prints one result of a stream (watch): a JSON line, or a row
// whose cells are padded to widths, so that rows printed apart line up.
// A cell longer than its width shifts only the rest of its own row.
func (p printer) stream(v any, row []string, widths []int) error {
	if p.json {
		return json.NewEncoder(p.w).Encode(v)
	}
	var b strings.Builder
	for i, cell := range row {
		if i == len(row)-1 {
			b.WriteString(cell)
			break
		}
		w := 0
		if i < len(widths) {
			w = widths[i]
		}
		fmt.Fprintf(&b, "%-*s  ", w, cell)
	}
	_, err := fmt.Fprintln(p.w, b.String())
	return err
}

// The shapes of the results, in JSON.

type grantOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Grant       coordinator.Grant       `json:"grant"`
}

type ownershipOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Ownership   coordinator.Ownership   `json:"ownership"`
}

type listOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Tasks       []coordinator.Ownership `json:"tasks"`
}

type eventOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	coordinator.OwnershipEvent
}

func grantTable(d coordinator.Disposition, g coordinator.Grant) table {
	return table{
		header: []string{"DISPOSITION", "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "REALM"},
		rows:   [][]string{{string(d), g.Tenant, g.Task, g.Owner, num(g.Epoch), coordinator.FormatLeaseID(g.Lease), g.Realm}},
	}
}

var ownershipHeader = []string{"TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "TTL", "STATE-VERSION", "LAST-OPERATION"}

// ownershipRow is one task's row. A stale owner (an owner key written
// before the last realm rotate, which holds nothing) shows as
// "stale:<owner>", with no TTL.
func ownershipRow(o coordinator.Ownership) []string {
	ttl := "-"
	if o.Owned() && o.TTLLeft >= 0 {
		ttl = fmt.Sprintf("%ds", o.TTLLeft)
	}
	owner := orDash(o.Owner)
	if o.Stale {
		owner = "stale:" + o.Owner
	}
	return []string{o.Tenant, o.Task, owner, numOrDash(o.Epoch), leaseOrDash(o.Lease), ttl,
		num(o.StateVersion), orDash(o.LastOperation)}
}

func num(n int64) string { return strconv.FormatInt(n, 10) }

func leaseOrDash(id int64) string {
	if id == 0 {
		return "-"
	}
	return coordinator.FormatLeaseID(id)
}

func numOrDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return num(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
