package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// Origin records, beside the realm, where it was minted: the etcd cluster
// that answered and the distance between its revision and its raft log. It
// is written when the realm is created and at every rotation.
//
// The signal: in one raft log, every entry adds at most one to the
// revision, so revision − applied raft index never grows over a cluster's
// life. Restoring etcd from a snapshot (etcdutl snapshot restore) starts a
// new raft log at index 1 (one entry per member) while the revision
// continues from the snapshot's (or beyond, with --bump-revision): the
// distance jumps up by about the snapshot's revision. A distance larger than
// the origin's by more than 256 (store.RestoreSlack) shows that etcd was restored (or
// the keyspace copied to another cluster) after the realm was minted. A
// cluster ID other than the origin's (a restore with another
// --initial-cluster-token or other peer URLs makes a new one) shows it too.
type Origin struct {
	Realm     string    `json:"realm"`
	ClusterID string    `json:"cluster_id"` // hex, as etcdctl prints it
	Revision  int64     `json:"revision"`   // etcd's revision when the origin was read
	RaftIndex uint64    `json:"raft_index"` // the applied raft index read with it
	At        time.Time `json:"at"`         // the writer's clock, for people only
}

// statusTimeout bounds the status request to one endpoint.
const statusTimeout = 2 * time.Second

// distance is revision − applied raft index.
func (o Origin) distance() int64 { return o.Revision - int64(o.RaftIndex) }

// OriginCheck compares the realm's Origin with the cluster answering now.
type OriginCheck struct {
	Realm  string  `json:"realm"`
	Origin *Origin `json:"origin"` // nil: none recorded (a keyspace older than origins); rotate to record one
	Now    Origin  `json:"now"`    // the same reading of the cluster answering now
	// Warnings say why the keyspace looks restored or moved since the realm
	// was minted: old grants may pass again and epochs may be reused until
	// the realm is rotated (docs/operations.md, restore). Empty when nothing
	// shows it; that is no proof that no restore happened.
	Warnings []string `json:"warnings"`
}

// clusterStatus asks every endpoint for its status. Of the members that
// answer it keeps the one with the largest revision − raft index when
// recording an origin (largest), the smallest when checking one: either
// way a doubt counts against a warning.
func (c *Coordinator) clusterStatus(ctx context.Context, op string, largest bool) (Origin, error) {
	var best Origin
	var answered bool
	var lastErr error
	for _, ep := range c.client.Endpoints() {
		var st *clientv3.StatusResponse
		sctx, cancel := context.WithTimeout(ctx, statusTimeout) // a member that does not answer must not use up the call
		err := c.s.Do(sctx, store.Request{Op: op}, func(ctx context.Context) (err error) {
			st, err = c.client.Status(ctx, ep)
			return err
		})
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		o := Origin{ClusterID: fmt.Sprintf("%x", st.Header.ClusterId), Revision: st.Header.Revision, RaftIndex: st.RaftAppliedIndex}
		if answered && o.ClusterID != best.ClusterID {
			return Origin{}, store.NewError(AuthorityUnavailable, op, "", "", fmt.Sprintf("the endpoints answer for two clusters, %s and %s", best.ClusterID, o.ClusterID), nil)
		}
		if !answered || (largest && o.distance() > best.distance()) || (!largest && o.distance() < best.distance()) {
			best = o
		}
		answered = true
	}
	if !answered {
		return Origin{}, lastErr
	}
	return best, nil
}

// origin builds the Origin of realm from the cluster's status now.
func (c *Coordinator) origin(ctx context.Context, op, realm string) (string, error) {
	o, err := c.clusterStatus(ctx, op, true)
	if err != nil {
		return "", err
	}
	o.Realm, o.At = realm, time.Now().UTC()
	raw, _ := json.Marshal(o)
	return string(raw), nil
}

// recordOrigin writes the origin of a realm this coordinator just created,
// only while that realm is still current. It is best effort: a realm without
// an origin works, and CheckOrigin says none is recorded.
func (c *Coordinator) recordOrigin(ctx context.Context, realm string, rev int64) {
	value, err := c.origin(ctx, "new", realm)
	if err == nil {
		_, err = c.s.Txn(ctx, store.TxnRequest{Op: "new",
			If:   []clientv3.Cmp{clientv3.Compare(clientv3.Value(c.keys.Realm()), "=", realm), clientv3.Compare(clientv3.ModRevision(c.keys.Realm()), "=", rev)},
			Then: []clientv3.Op{clientv3.OpPut(c.keys.Origin(), value)}})
	}
	if err != nil {
		c.lg.Warn("realm origin not recorded: a restore will not be detected until the realm is rotated",
			zap.String("realm", realm), zap.String("disposition", string(DispositionOf(err))), zap.Error(err))
	}
}

// CheckOrigin reads the realm and its origin and compares them with the
// cluster answering now. It writes nothing.
func (c *Coordinator) CheckOrigin(ctx context.Context) (OriginCheck, error) {
	resp, err := c.s.Txn(ctx, store.TxnRequest{Op: "realm", ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(c.keys.Realm()), clientv3.OpGet(c.keys.Origin())}})
	if err != nil {
		return OriginCheck{}, err
	}
	realm, originKV := store.FirstKV(resp.Responses[0]), store.FirstKV(resp.Responses[1])
	if realm == nil {
		return OriginCheck{}, store.NewError(NoKeyspace, "realm", "", "", "no realm key at "+c.keys.Realm(), nil)
	}
	now, err := c.clusterStatus(ctx, "realm", false)
	if err != nil {
		return OriginCheck{}, err
	}
	chk := OriginCheck{Realm: string(realm.Value), Now: now, Warnings: []string{}}
	if originKV == nil {
		chk.Warnings = append(chk.Warnings, "no origin is recorded for this realm, so a restore cannot be detected; 'leasegate realm rotate' records one")
		return chk, nil
	}
	var o Origin
	if err := json.Unmarshal(originKV.Value, &o); err != nil {
		chk.Warnings = append(chk.Warnings, fmt.Sprintf("the realm's origin is unreadable (%v); 'leasegate realm rotate' records a new one", err))
		return chk, nil
	}
	chk.Origin = &o
	if o.Realm != chk.Realm {
		chk.Warnings = append(chk.Warnings, fmt.Sprintf("the origin is of realm %s, not of the current realm: the realm was written without leasegate", o.Realm))
	}
	if o.ClusterID != now.ClusterID {
		chk.Warnings = append(chk.Warnings, fmt.Sprintf("the realm was minted on etcd cluster %s, but cluster %s answers: the keyspace was restored from a snapshot or copied; rotate the realm (docs/operations.md, restore)", o.ClusterID, now.ClusterID))
	}
	if now.distance() > o.distance()+store.RestoreSlack {
		chk.Warnings = append(chk.Warnings, fmt.Sprintf("etcd's revision is %d past its raft index, %d when the realm was minted: etcd was restored from a snapshot since (a new raft log); rotate the realm (docs/operations.md, restore)", now.distance(), o.distance()))
	}
	return chk, nil
}
