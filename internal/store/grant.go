package store

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Grant is an owner's evidence of one claim: a plain value, checked by the
// authority at every use and never authority by itself. Any Coordinator of
// the same realm can check it.
type Grant struct {
	Realm  string `json:"realm"`
	Tenant string `json:"tenant"`
	Task   string `json:"task"`
	Owner  string `json:"owner"`
	Epoch  int64  `json:"epoch"`
	Lease  int64  `json:"lease"` // in JSON a hex string, as etcdctl prints it; a number is accepted on input
}

// grantJSON is Grant's JSON shape: the lease as a hex string.
type grantJSON struct {
	Realm  string    `json:"realm"`
	Tenant string    `json:"tenant"`
	Task   string    `json:"task"`
	Owner  string    `json:"owner"`
	Epoch  int64     `json:"epoch"`
	Lease  LeaseJSON `json:"lease"`
}

// MarshalJSON writes the lease as a hex string ("694d7b1f3c2a0b11"), as
// etcdctl prints it: as a JSON number an ID above 2^53 is rounded by jq and
// JavaScript.
func (g Grant) MarshalJSON() ([]byte, error) {
	return json.Marshal(grantJSON{Realm: g.Realm, Tenant: g.Tenant, Task: g.Task, Owner: g.Owner, Epoch: g.Epoch, Lease: LeaseJSON(g.Lease)})
}

// UnmarshalJSON reads a grant whose lease is a hex string or a number. A
// field a grant does not have is an error: a misspelt field would otherwise
// read as a zero value.
func (g *Grant) UnmarshalJSON(b []byte) error {
	var j grantJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	*g = Grant{Realm: j.Realm, Tenant: j.Tenant, Task: j.Task, Owner: j.Owner, Epoch: j.Epoch, Lease: int64(j.Lease)}
	return nil
}

// Validate reports why g cannot be a grant at all.
func (g Grant) Validate() error {
	if g.Realm == "" {
		return fmt.Errorf("grant has no realm")
	}
	if err := CheckTask(g.Tenant, g.Task); err != nil {
		return err
	}
	if err := CheckLabel("owner", g.Owner); err != nil {
		return err
	}
	if g.Epoch <= 0 {
		return fmt.Errorf("grant epoch %d must be positive", g.Epoch)
	}
	if g.Lease <= 0 {
		return fmt.Errorf("grant lease %d must be positive", g.Lease)
	}
	return nil
}
