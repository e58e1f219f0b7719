package gateway

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// jsonCodec is connect's JSON codec with one change: a request the API
// cannot read — a field the API does not have, a value of the wrong type,
// JSON that does not parse — is not refused inside the codec (where connect
// answers invalid_argument without a Refusal), but decoded with a marker
// in its unknown fields, so that the interceptor refuses it like a binary
// message with unknown fields: with the disposition, detail and hint.
type jsonCodec struct{}

// unknownMarker stands for the fields a JSON request had that the API does
// not: a field number no message of the API uses.
var unknownMarker = protowire.AppendVarint(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.VarintType), 0)

// malformedNumber is the field number of the marker of a request that is
// not the message's JSON at all; its value is the decoder's error.
const malformedNumber = protowire.MaxValidNumber - 1

// malformedMarker marks a JSON request the decoder refused, carrying why.
func malformedMarker(err error) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, malformedNumber, protowire.BytesType), []byte(err.Error()))
}

// malformed is the decoder's error a malformedMarker carries, if unknown
// (a message's unknown fields) is one.
func malformed(unknown []byte) (string, bool) {
	n, typ, l := protowire.ConsumeTag(unknown)
	if l < 0 || n != malformedNumber || typ != protowire.BytesType {
		return "", false
	}
	v, m := protowire.ConsumeBytes(unknown[l:])
	if m < 0 {
		return "", false
	}
	return string(v), true
}

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
		proto.Reset(pm) // malformed, not only unknown fields: nothing of it is read
		pm.ProtoReflect().SetUnknown(malformedMarker(err))
		return nil
	}
	pm.ProtoReflect().SetUnknown(unknownMarker)
	return nil
}
