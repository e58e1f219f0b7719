package realprov

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Reclone makes the pair a primary and a fresh streaming standby again,
// after a failover drill's trial left it crashed, promoted or stopped
// (promotion is one-way): the standby is stopped (thawed first if frozen),
// the primary started again if it is not running (its data as the crash
// left it: PostgreSQL recovers it), the standby's data directory replaced
// by a new pg_basebackup -R of the primary, and the standby started on its
// port and streaming. The standby's log is kept (appended to).
func (p *PGPair) Reclone(ctx context.Context) error {
	if err := p.Standby.Stop(); err != nil {
		return err
	}
	if !p.Primary.Running() {
		if err := p.Primary.Start(ctx); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(p.Standby.Data); err != nil {
		return fmt.Errorf("realprov: remove %s: %w", p.Standby.Data, err)
	}
	bb := p.acct.command(pgBin("pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(p.Primary.Port), "-U", "postgres",
		"-D", p.Standby.Data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	bb.Env = append(bb.Env, "PGPASSWORD="+p.superPass)
	if out, err := bb.CombinedOutput(); err != nil {
		return fmt.Errorf("realprov: pg_basebackup: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := p.Standby.Start(ctx); err != nil {
		return err
	}
	return p.waitStreaming(ctx)
}

// Disarm takes back a cut the proxy was armed with (CutAfter, DropAt,
// OnRequest) and that has not fired: the next trial starts unarmed.
func (p *CutProxy) Disarm() {
	p.mu.Lock()
	p.pattern, p.before = nil, nil
	p.mu.Unlock()
}
