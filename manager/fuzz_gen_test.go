package main

// A descriptor-driven request generator: fuzz entropy picks fields of the
// request type (set or not, at any depth) and gives them boundary values,
// starting from the procedure's valid request so that most requests pass
// parsing and reach the handlers' semantic checks.

import (
	"cmp"
	"encoding/base64"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// entropy hands out the fuzzer's bytes as choices; once they run out every
// choice is 0, so any input is a complete recipe.
type entropy struct {
	b []byte
	i int
}

func (e *entropy) byte() byte {
	if e.i >= len(e.b) {
		return 0
	}
	e.i++
	return e.b[e.i-1]
}

func (e *entropy) left() bool { return e.i < len(e.b) }

// intn is a choice in [0, n).
func (e *entropy) intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := int(e.byte())
	if n > 256 {
		v = v<<8 | int(e.byte())
	}
	return v % n
}

// Boundary values. Strings stay valid UTF-8: proto3 strings must be, and a
// request the client cannot encode tests nothing on the server.
var (
	boundaryStrings = []string{
		"", " ", "..", "../..", "../../etc/passwd", "a/../b", "/abs", "a/b", ".", "-", "a0", "fuzzrun",
		"flytesnacks", "development", "fuzz.task", "名前😀", "\u202eevil", "\x00", "a\x00b", "\t\n", "%2e%2e",
		"__0x2f", `a\b`, "'; DROP TABLE actions;--", `{{.input}}`, "UPPER", "0", "-1", "9223372036854775808",
		"file:///etc/passwd", "s3://bucket/key", blobsPlaceholder + "/fuzz/x", blobsPlaceholder + "/../x",
		// Storage the fixture made: an object, a path under it, directories, the root.
		fxFile, fxFile + "/x", blobsPlaceholder + "/fuzz", blobsPlaceholder + "/runs", blobsPlaceholder, blobsPlaceholder + "/",
		"http://[::1]:1/", strings.Repeat("a", 64), strings.Repeat("b", 256), strings.Repeat("c", 1025),
		strings.Repeat("é", 40000), strings.Repeat("x/", 600),
		// Words the handlers give meaning to: filter fields, sort keys,
		// phases, times, and page tokens that decode but point anywhere.
		"phase", "task_name", "task_version", "created_by", "created_at", "updated_at", "name", "id",
		"RUNNING", "ACTION_PHASE_SUCCEEDED", "ACTION_PHASE_UNSPECIFIED", "999", "2024-01-01T00:00:00Z",
		"0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2024-13-45T25:61:61Z", "1e400",
		"eq(state,0)", "eq(state,2)", "ne(state,-1)", "eq(state,99999999999)", "eq(state,", "value_in(state,0;1)",
		"eq(name,x)+eq(state,1)", "gte(created_at,2024-01-01T00:00:00Z)", "contains(name,%)",
		pageToken(`{"q":"runs:desc","t":-9223372036854775808,"i":-9223372036854775808}`),
		pageToken(`{"q":"runs:asc","t":9223372036854775807,"i":9223372036854775807}`),
		pageToken(`{"q":"actions","t":253402300800000000,"i":1}`),
		pageToken(`{"q":"tasks","t":-62135596800000001,"s":"\u0000","i":0}`),
		pageToken(`{"q":"projects","s":"\uffff","i":-1}`),
		pageToken(`{"q":"children","t":"x"}`), pageToken(`[]`), pageToken(`null`),
	}
	boundaryInts   = []int64{0, 1, -1, 2, 100, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, 1 << 31, -1 << 40}
	boundaryUints  = []uint64{0, 1, 2, 100, math.MaxUint32, math.MaxUint64, 1 << 31}
	boundaryFloats = []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64}
	unknownEnums   = []protoreflect.EnumNumber{-1, 9999, math.MaxInt32, math.MinInt32}
)

// pageToken encodes a cursor the way the store's page tokens are encoded.
func pageToken(cursor string) string { return base64.RawURLEncoding.EncodeToString([]byte(cursor)) }

// maxGenDepth bounds how deep the generator descends into set fields
// (nesting by recursion is built separately, see nest).
const maxGenDepth = 8

// generate returns p's valid request (or, when the entropy says so, an
// empty one) with boundary mutations the entropy chooses. No entropy is the
// valid request itself.
func generate(template *dynamicpb.Message, e *entropy) *dynamicpb.Message {
	msg := proto.Clone(template).(*dynamicpb.Message)
	if !e.left() {
		return msg
	}
	if e.intn(8) == 0 {
		msg = dynamicpb.NewMessage(template.Descriptor())
	}
	for n := 1 + e.intn(4); n > 0; n-- {
		mutate(msg, e, 0)
	}
	return msg
}

// mutate changes one field of m, chosen among all its fields (set or not).
func mutate(m protoreflect.Message, e *entropy, depth int) {
	fields := m.Descriptor().Fields()
	if fields.Len() == 0 {
		return
	}
	// Prefer fields that are set: they are where the valid request lives.
	var set []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		set = append(set, fd)
		return true
	})
	// dynamicpb ranges in map order; sort so that entropy replays exactly.
	slices.SortFunc(set, func(a, b protoreflect.FieldDescriptor) int { return cmp.Compare(a.Number(), b.Number()) })
	var fd protoreflect.FieldDescriptor
	if len(set) > 0 && e.intn(3) > 0 {
		fd = set[e.intn(len(set))]
	} else {
		fd = fields.Get(e.intn(fields.Len()))
	}
	switch {
	case fd.IsMap():
		mutateMap(m, fd, e, depth)
	case fd.IsList():
		mutateList(m, fd, e, depth)
	case fd.Message() != nil:
		switch c := e.intn(8); {
		case c == 0:
			m.Clear(fd)
		case c == 1:
			m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		case c == 2:
			nest(m.Mutable(fd).Message(), e)
		case depth < maxGenDepth:
			mutate(m.Mutable(fd).Message(), e, depth+1)
		}
	default:
		if e.intn(8) == 0 {
			m.Clear(fd)
			return
		}
		m.Set(fd, scalar(fd, m.Get(fd), e))
	}
}

func mutateList(m protoreflect.Message, fd protoreflect.FieldDescriptor, e *entropy, depth int) {
	l := m.Mutable(fd).List()
	switch c := e.intn(6); {
	case c == 0:
		m.Clear(fd)
	case c == 1: // many elements, each small: the point is the count, not the size
		n := []int{100, 1000, 10000}[e.intn(3)]
		v := scalar(fd, protoreflect.Value{}, e)
		if str, ok := v.Interface().(string); ok && len(str) > 16 {
			v = protoreflect.ValueOfString(strings.ToValidUTF8(str[:16], ""))
		} else if b, ok := v.Interface().([]byte); ok && len(b) > 16 {
			v = protoreflect.ValueOfBytes(b[:16])
		}
		for range n {
			if fd.Message() != nil {
				l.AppendMutable()
			} else {
				l.Append(v)
			}
		}
	case c == 2 || l.Len() == 0:
		if fd.Message() != nil {
			el := l.AppendMutable().Message()
			if depth < maxGenDepth {
				mutate(el, e, depth+1)
			}
		} else {
			l.Append(scalar(fd, protoreflect.Value{}, e))
		}
	default: // change an element in place
		i := e.intn(l.Len())
		if fd.Message() != nil {
			if depth < maxGenDepth {
				mutate(l.Get(i).Message(), e, depth+1)
			}
		} else {
			l.Set(i, scalar(fd, l.Get(i), e))
		}
	}
}

func mutateMap(m protoreflect.Message, fd protoreflect.FieldDescriptor, e *entropy, depth int) {
	if e.intn(6) == 0 {
		m.Clear(fd)
		return
	}
	mp := m.Mutable(fd).Map()
	n := 1
	if e.intn(6) == 0 {
		n = 1000
	}
	for range n {
		k := scalar(fd.MapKey(), protoreflect.Value{}, e).MapKey()
		if fd.MapValue().Message() != nil {
			v := mp.Mutable(k).Message()
			if depth < maxGenDepth {
				mutate(v, e, depth+1)
			}
		} else {
			mp.Set(k, scalar(fd.MapValue(), protoreflect.Value{}, e))
		}
	}
}

// scalar is a boundary value for fd, or a variation of the current one.
func scalar(fd protoreflect.FieldDescriptor, cur protoreflect.Value, e *entropy) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		s, _ := cur.Interface().(string)
		switch e.intn(6) {
		case 0:
			return protoreflect.ValueOfString(s + boundaryStrings[e.intn(len(boundaryStrings))])
		case 1:
			return protoreflect.ValueOfString(strings.Repeat(s+"x", 1+e.intn(300)))
		}
		return protoreflect.ValueOfString(boundaryStrings[e.intn(len(boundaryStrings))])
	case protoreflect.BytesKind:
		switch e.intn(4) {
		case 0:
			return protoreflect.ValueOfBytes(nil)
		case 1:
			return protoreflect.ValueOfBytes(make([]byte, []int{15, 16, 17, 1 << 20}[e.intn(4)]))
		case 2:
			return protoreflect.ValueOfBytes([]byte{0xff, 0xfe, 0x0a, 0x00, 0x80})
		}
		b := make([]byte, e.intn(64))
		for i := range b {
			b[i] = e.byte()
		}
		return protoreflect.ValueOfBytes(b)
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(e.intn(2) == 0)
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		if e.intn(3) == 0 {
			return protoreflect.ValueOfEnum(unknownEnums[e.intn(len(unknownEnums))])
		}
		return protoreflect.ValueOfEnum(values.Get(e.intn(values.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(boundaryInts[e.intn(len(boundaryInts))]))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(boundaryInts[e.intn(len(boundaryInts))])
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(boundaryUints[e.intn(len(boundaryUints))]))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(boundaryUints[e.intn(len(boundaryUints))])
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(boundaryFloats[e.intn(len(boundaryFloats))]))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(boundaryFloats[e.intn(len(boundaryFloats))])
	}
	return cur
}

// nest makes m deeply nested when its type can contain itself (a Literal
// in a collection of Literals, a Struct in a Value...): it follows the
// shortest path of message fields back to m's type many times over.
func nest(m protoreflect.Message, e *entropy) {
	path := cycleOf(m.Descriptor())
	if path == nil {
		return
	}
	times := []int{10, 100, 1000}[e.intn(3)]
	cur := m
	for range times {
		for _, fd := range path {
			if fd.IsList() {
				cur = cur.Mutable(fd).List().AppendMutable().Message()
			} else {
				cur = cur.Mutable(fd).Message()
			}
		}
	}
}

// cycleOf is the shortest path of (non-map) message fields from md back to
// md, or nil; it searches a few levels only.
func cycleOf(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	type step struct {
		at   protoreflect.MessageDescriptor
		path []protoreflect.FieldDescriptor
	}
	queue := []step{{md, nil}}
	seen := map[protoreflect.FullName]bool{}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if len(s.path) >= 4 {
			continue
		}
		fields := s.at.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if fd.Message() == nil || fd.IsMap() {
				continue
			}
			path := append(append([]protoreflect.FieldDescriptor(nil), s.path...), fd)
			if fd.Message().FullName() == md.FullName() {
				return path
			}
			if !seen[fd.Message().FullName()] {
				seen[fd.Message().FullName()] = true
				queue = append(queue, step{fd.Message(), path})
			}
		}
	}
	return nil
}
