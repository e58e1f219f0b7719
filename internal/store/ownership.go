package store

import "encoding/json"

// Ownership is what the authority shows of one task at one revision.
type Ownership struct {
	Tenant  string `json:"tenant"`
	Task    string `json:"task"`
	Owner   string `json:"owner"`            // "" when nobody holds the task
	Epoch   int64  `json:"epoch"`            // the holder's epoch; 0 when unowned
	Lease   int64  `json:"lease"`            // the holder's lease; 0 when unowned; in JSON a hex string ("" for none)
	TTLLeft int64  `json:"ttl_left_seconds"` // seconds left on the lease; -1 when unowned, stale or unknown
	// Stale marks an owner key written before the current realm (before a
	// realm rotate): it is still in etcd, on its lease, but holds nothing —
	// every grant of it is refused and any session may claim the task.
	// Owner, Epoch and Lease then describe that key; Owned() is false.
	Stale         bool   `json:"stale"`
	Fence         int64  `json:"fence_epoch"`   // the published floor: the last epoch granted
	StateVersion  int64  `json:"state_version"` // protected state version (0: never committed)
	LastOperation string `json:"last_operation,omitempty"`
	Revision      int64  `json:"revision"` // the etcd revision this was read at
}

// Owned reports whether somebody holds the task: an owner key of the
// current realm.
func (o Ownership) Owned() bool { return o.Owner != "" && !o.Stale }

// ownershipJSON is Ownership's JSON shape: the lease as a hex string.
type ownershipJSON struct {
	plainOwnership
	Lease LeaseJSON `json:"lease"`
}

type plainOwnership Ownership

// MarshalJSON writes the lease as a hex string, as etcdctl prints it.
func (o Ownership) MarshalJSON() ([]byte, error) {
	return json.Marshal(ownershipJSON{plainOwnership: plainOwnership(o), Lease: LeaseJSON(o.Lease)})
}

// UnmarshalJSON reads an Ownership whose lease is a hex string or a number.
func (o *Ownership) UnmarshalJSON(b []byte) error {
	var j ownershipJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*o = Ownership(j.plainOwnership)
	o.Lease = int64(j.Lease)
	return nil
}
