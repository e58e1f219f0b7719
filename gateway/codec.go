package gateway

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// jsonCodec is connect's JSON codec with one change: a request with a field
// the API does not have is not refused inside the codec (where connect
// answers invalid_argument without a Refusal), but decoded with the field
// marked unknown, so that the interceptor refuses it like a binary message
// with unknown fields — with the disposition, detail and hint.
type jsonCodec struct{}

// unknownMarker stands for the fields a JSON request had that the API does
// not: a field number no message of the API uses.
var unknownMarker = protowire.AppendVarint(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.VarintType), 0)

func (jsonCodec) Name() string { return "json" }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("gateway: %T is not a protobuf message", m)
	}
	return protojson.MarshalOptions{}.Marshal(pm)
}

func (jsonCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("gateway: %T is not a protobuf message", m)
	}
	if len(b) == 0 {
		return nil // an empty body is an empty message, as connect's codec reads it
	}
	err := protojson.Unmarshal(b, pm)
	if err == nil {
		return nil
	}
	if (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, pm) != nil {
		return err // malformed, not only unknown fields
	}
	pm.ProtoReflect().SetUnknown(unknownMarker)
	return nil
}
