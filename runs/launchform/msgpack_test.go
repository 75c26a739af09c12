package launchform

import (
	"fmt"
	"testing"
)

// A msgpack map of each kind the SDK writes decodes to its JSON form;
// truncated, trailing and unsupported bytes are refused, never a panic.
func TestDecodeMsgpack(t *testing.T) {
	value := []byte{
		0x85,            // map of 5
		0xa1, 'a', 0x01, // "a": 1
		0xa1, 'b', 0x93, 0xc3, 0xc0, 0xa1, 'x', // "b": [true, nil, "x"]
		0x03, 0xfe, // 3: -2 (an int key, as dict[int, int] has)
		0xa1, 'f', 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, // "f": 1.5
		0xa1, 'n', 0xd1, 0xff, 0x38, // "n": int16 -200
	}
	got, err := decodeMsgpack(value)
	if err != nil {
		t.Fatal(err)
	}
	if want := "map[3:-2 a:1 b:[true <nil> x] f:1.5 n:-200]"; fmt.Sprint(got) != want {
		t.Fatalf("decoded %v, want %s", got, want)
	}
	for name, bad := range map[string][]byte{
		"truncated": value[:len(value)-3],
		"trailing":  append(append([]byte{}, value...), 0x01),
		"ext":       {0xd4, 0x01, 0x02},
		"huge":      {0xdd, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := decodeMsgpack(bad); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}
