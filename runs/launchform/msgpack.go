package launchform

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
)

// The SDK sends dataclasses, pydantic models and dicts that are no
// map[str, T] as a Binary scalar tagged "msgpack". decodeMsgpack reads
// such a value as JSON would hold it: maps with their keys as strings,
// raw bytes as base64. Extension types (the SDK writes none) are refused.

var errShortMsgpack = errors.New("msgpack value ends early")

// maxMsgpackDepth bounds nesting, so a hostile value cannot exhaust the stack.
const maxMsgpackDepth = 256

func decodeMsgpack(b []byte) (any, error) {
	d := &mpDecoder{b: b}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.i != len(d.b) {
		return nil, fmt.Errorf("msgpack value has %d trailing bytes", len(d.b)-d.i)
	}
	return v, nil
}

type mpDecoder struct {
	b []byte
	i int
}

func (d *mpDecoder) take(n int) ([]byte, error) {
	if n < 0 || d.i+n > len(d.b) {
		return nil, errShortMsgpack
	}
	s := d.b[d.i : d.i+n]
	d.i += n
	return s, nil
}

// uint reads a big-endian unsigned integer of n bytes.
func (d *mpDecoder) uint(n int) (uint64, error) {
	s, err := d.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range s {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

func (d *mpDecoder) value(depth int) (any, error) {
	if depth > maxMsgpackDepth {
		return nil, errors.New("msgpack value nests too deeply")
	}
	s, err := d.take(1)
	if err != nil {
		return nil, err
	}
	c := s[0]
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c&0xf0 == 0x80:
		return d.mapOf(int(c&0x0f), depth)
	case c&0xf0 == 0x90:
		return d.arrayOf(int(c&0x0f), depth)
	case c&0xe0 == 0xa0:
		return d.str(int(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6:
		n, err := d.uint(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		raw, err := d.take(int(n))
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString(raw), nil
	case 0xca:
		n, err := d.uint(4)
		return float64(math.Float32frombits(uint32(n))), err
	case 0xcb:
		n, err := d.uint(8)
		return math.Float64frombits(n), err
	case 0xcc, 0xcd, 0xce, 0xcf:
		n, err := d.uint(1 << (c - 0xcc))
		if n > math.MaxInt64 {
			return float64(n), err
		}
		return int64(n), err
	case 0xd0, 0xd1, 0xd2, 0xd3:
		size := 1 << (c - 0xd0)
		n, err := d.uint(size)
		shift := 64 - 8*size // sign-extend
		return int64(n<<shift) >> shift, err
	case 0xd9, 0xda, 0xdb:
		n, err := d.uint(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(int(n))
	case 0xdc, 0xdd:
		n, err := d.uint(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.arrayOf(int(n), depth)
	case 0xde, 0xdf:
		n, err := d.uint(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return d.mapOf(int(n), depth)
	}
	return nil, fmt.Errorf("msgpack type 0x%02x is not supported", c)
}

func (d *mpDecoder) str(n int) (any, error) {
	s, err := d.take(n)
	return string(s), err
}

func (d *mpDecoder) arrayOf(n int, depth int) (any, error) {
	if n > len(d.b)-d.i { // every element takes a byte at least
		return nil, errShortMsgpack
	}
	out := make([]any, n)
	for k := range out {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func (d *mpDecoder) mapOf(n int, depth int) (any, error) {
	if 2*n > len(d.b)-d.i {
		return nil, errShortMsgpack
	}
	out := make(map[string]any, n)
	for range n {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			key = fmt.Sprint(k) // JSON keys are strings: dict[int, int] shows "1": 2
		}
		out[key] = v
	}
	return out, nil
}
