package store

import "encoding/json"

// The values stored under the keys of keys.go.

// FenceRecord is the value of a fence key: who the published epoch belongs to.
type FenceRecord struct {
	Owner string `json:"owner"`
	Lease int64  `json:"lease"`
}

// StateRecord is the value of a state key. Its Version equals the etcd
// Version of the key (the number of commits since it was created).
type StateRecord struct {
	Version   int64  `json:"version"`
	Value     []byte `json:"value"`
	Operation string `json:"operation"`
	Epoch     int64  `json:"epoch"`
}

// OpRecord is the value of an operation key: the committed operation's
// payload digest and the receipt every retry gets back.
type OpRecord struct {
	PayloadDigest string          `json:"payload_digest"`
	Receipt       json.RawMessage `json:"receipt"`
	Epoch         int64           `json:"epoch"`
	Owner         string          `json:"owner"`
}
