package cache

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
)

// The cache key of a discoverable task, computed as the SDK computes the
// key it sends with a child action (flyte/_internal/runtime/convert.py,
// generate_cache_key_hash), so that a run's root action and the same task
// called as a child share their cache entries:
//
//	key        = b64(sha256(inputsHash + taskName + interfaceHash + discoveryVersion))
//	inputsHash = b64(sha256(name ":" repr(literal) ";" ...)) over the inputs
//	             in order, minus cache_ignore_input_vars ("" when none is left)
//	repr       = the literal's own hash when it carries one; a collection's or
//	             map's elements (map keys sorted, each key before its value);
//	             otherwise the literal's deterministic encoding
//	interfaceHash = b64(sha256(deterministic encoding of the interface with
//	             its input and output variables sorted by name))
//
// The SDK also re-encodes msgpack-tagged binary scalars with their map keys
// sorted before encoding them; the manager uses the bytes as sent, which is
// the same whenever the SDK produced them with sorted keys (dataclasses and
// Pydantic models do; a plain dict built in another order may not, and then
// a root and a child call of it miss each other's entries).

// Key is the cache key of running tmpl on inputs.
func Key(tmpl *core.TaskTemplate, inputs *task.Inputs) string {
	md := tmpl.GetMetadata()
	return hashB64(inputsHash(inputs, md.GetCacheIgnoreInputVars()) + tmpl.GetId().GetName() +
		interfaceHash(tmpl.GetInterface()) + md.GetDiscoveryVersion())
}

func hashB64(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

var deterministic = proto.MarshalOptions{Deterministic: true}

func inputsHash(in *task.Inputs, ignored []string) string {
	var b strings.Builder
	n := 0
	for _, nl := range in.GetLiterals() {
		if slices.Contains(ignored, nl.GetName()) {
			continue
		}
		n++
		b.WriteString(nl.GetName())
		b.WriteByte(':')
		b.Write(literalRepr(nl.GetValue()))
		b.WriteByte(';')
	}
	if n == 0 {
		return ""
	}
	return hashB64(b.String())
}

func literalRepr(l *core.Literal) []byte {
	if l.GetHash() != "" {
		return []byte(l.GetHash())
	}
	if c := l.GetCollection(); c != nil {
		var out []byte
		for _, e := range c.GetLiterals() {
			out = append(out, literalRepr(e)...)
		}
		return out
	}
	if m := l.GetMap(); m != nil {
		keys := make([]string, 0, len(m.GetLiterals()))
		for k := range m.GetLiterals() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []byte
		for _, k := range keys {
			out = append(out, k...)
			out = append(out, literalRepr(m.GetLiterals()[k])...)
		}
		return out
	}
	b, _ := deterministic.Marshal(l)
	return b
}

func interfaceHash(iface *core.TypedInterface) string {
	sorted := &core.TypedInterface{}
	if iface != nil {
		sorted = proto.Clone(iface).(*core.TypedInterface)
	}
	for _, vm := range []*core.VariableMap{sorted.GetInputs(), sorted.GetOutputs()} {
		if vm != nil {
			sort.SliceStable(vm.Variables, func(i, j int) bool { return vm.Variables[i].GetKey() < vm.Variables[j].GetKey() })
		}
	}
	b, _ := deterministic.Marshal(sorted)
	return hashB64(string(b))
}
