package coordinator

import (
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// FormatLeaseID writes a lease ID as etcdctl does: 16 hex digits
// ("694d7b1f3c2a0b11"). leasegate's JSON carries lease IDs in this form, as
// strings: an ID above 2^53 as a JSON number is rounded by jq and
// JavaScript, and the mangled grant then names another lease.
func FormatLeaseID(id int64) string { return store.FormatLeaseID(id) }

// leaseField is a lease ID as a log field: 16 hex digits, as etcdctl, the
// CLI and the JSON output write it, at every level.
func leaseField(id int64) zap.Field { return zap.String("lease-id", FormatLeaseID(id)) }

// ParseLeaseID reads a lease ID written in hex, as etcdctl and leasegate's
// JSON show it ("694d7b1f3c2a0b11", "0x694d7b1f3c2a0b11"), or in decimal.
// A string of exactly 16 digits is read as hex (etcdctl's %016x form); a
// decimal ID is any other run of digits. The ID must be positive.
func ParseLeaseID(s string) (int64, error) { return store.ParseLeaseID(s) }
