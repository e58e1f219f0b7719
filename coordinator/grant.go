package coordinator

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/leasegate/leasegate/internal/store"
)

// Grant is an owner's evidence of one claim: a plain value, checked by the
// authority at every use and never authority by itself. Any Coordinator of
// the same realm can check it. Its fields are Realm, Tenant, Task, Owner,
// Epoch and Lease (in JSON a hex string, as etcdctl prints it; a number is
// accepted on input); Validate reports why a value cannot be a grant.
type Grant = store.Grant

// fields are the log fields of a grant; taskFields leave out owner and
// lease, for a logger that already carries them (a session's).
func grantFields(g Grant) []zap.Field {
	return append(grantTaskFields(g), zap.String("owner", g.Owner), leaseField(g.Lease))
}

func grantTaskFields(g Grant) []zap.Field {
	return []zap.Field{zap.String("tenant", g.Tenant), zap.String("task", g.Task), zap.Int64("epoch", g.Epoch)}
}

// logGrant logs msg with g's fields (its task fields only for a logger
// that carries owner and lease already), building them only when the level
// is on: claims and releases allocate nothing for a logger that drops them.
func logGrant(lg *zap.Logger, level zapcore.Level, msg string, g Grant, taskOnly bool) {
	if ce := lg.Check(level, msg); ce != nil {
		if taskOnly {
			ce.Write(grantTaskFields(g)...)
		} else {
			ce.Write(grantFields(g)...)
		}
	}
}
