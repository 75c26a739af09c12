package server

import (
	"context"
	"fmt"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
)

// The org part of identifiers is settled here, once for every service, so
// that no service has to know which client sends what (config.Orgs):
//
//   - on the way in, every org field of a request is read; the first
//     non-empty one is the org the client uses. In a single-org deployment
//     every org field is then cleared, so all clients reach the same data
//     (stored under the empty org, where SDKs pointed at localhost have
//     always put it); with separate orgs only the default org's name is
//     cleared (it names the empty org).
//   - on the way out, every identifier with an empty org is given the
//     client's org, or the default org when the client named none.
//
// An org field is a singular string field named "org" or "organization";
// the user and application descriptions of identity.proto carry an
// "organization" that is no identifier and are left alone. The messages of
// flyteidl2.core are documents the client wrote (a task template and its
// id, literals) and are passed through as they are, unread.

// notIdentifiers are messages whose org field is descriptive, not a scope.
var notIdentifiers = map[protoreflect.FullName]bool{
	"flyteidl2.common.UserSpec": true,
	"flyteidl2.common.AppSpec":  true,
}

// orgInterceptor applies the org rules to every handler.
type orgInterceptor struct{ cfg config.Orgs }

func (i *orgInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		var client string
		if m, ok := req.Any().(proto.Message); ok {
			var err error
			if client, err = i.inbound(m); err != nil {
				return nil, err
			}
		}
		res, err := next(ctx, req)
		if err == nil && res != nil {
			if m, ok := res.Any().(proto.Message); ok {
				stampInPlace(m, i.answer(client))
			}
		}
		return res, err
	}
}

func (i *orgInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *orgInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return next(ctx, &orgConn{StreamingHandlerConn: conn, i: i})
	}
}

// orgConn applies the rules to each message of a stream; the client's org
// is the first one a received message names.
type orgConn struct {
	connect.StreamingHandlerConn
	i      *orgInterceptor
	client string
}

func (c *orgConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if m, ok := msg.(proto.Message); ok {
		org, err := c.i.inbound(m)
		if err != nil {
			return err
		}
		if c.client == "" {
			c.client = org
		}
	}
	return nil
}

func (c *orgConn) Send(msg any) error {
	if m, ok := msg.(proto.Message); ok {
		msg = stamped(m, c.i.answer(c.client))
	}
	return c.StreamingHandlerConn.Send(msg)
}

// answer is the org given to identifiers returned to a client.
func (i *orgInterceptor) answer(client string) string {
	if client != "" {
		return client
	}
	return i.cfg.Default
}

// inbound returns the first org m names and clears the org fields the
// configuration maps to the empty org. m is a request just decoded for
// this call, so it is changed in place. An org that is no identifier
// segment is refused, naming its field.
func (i *orgInterceptor) inbound(m proto.Message) (string, error) {
	var first string
	var bad error
	eachOrgAt(m.ProtoReflect(), "", func(msg protoreflect.Message, fd protoreflect.FieldDescriptor, at string) {
		v := msg.Get(fd).String()
		if v == "" || bad != nil {
			return
		}
		if !config.ValidOrg(v) { // it is echoed back and, with separate orgs, stored
			bad = errs.Invalidf("%s %q may only contain letters, digits, '-' and '_' (at most 63)", at, v)
			return
		}
		if first == "" {
			first = v
		}
		if !i.cfg.Separate || v == i.cfg.Default {
			msg.Set(fd, protoreflect.ValueOfString(""))
		}
	})
	return first, bad
}

// stamped returns m with org given to every identifier that has none. A
// response may share parts with a cache (the run state keeps decoded task
// specs), so m is never changed: a copy is, and only when needed.
func stamped(m proto.Message, org string) proto.Message {
	if !needsOrg(m) {
		return m
	}
	c := proto.Clone(m)
	eachOrg(c.ProtoReflect(), func(msg protoreflect.Message, fd protoreflect.FieldDescriptor) {
		if wantsOrg(msg, fd) {
			msg.Set(fd, protoreflect.ValueOfString(org))
		}
	})
	return c
}

// stampInPlace stamps a unary response. The response message itself is
// built for this call, but what it points to may be shared, so its fields
// are replaced by those of a stamped copy.
func stampInPlace(m proto.Message, org string) {
	c := stamped(m, org)
	if c == m {
		return
	}
	dst := m.ProtoReflect()
	c.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
}

func needsOrg(m proto.Message) bool {
	found := false
	eachOrg(m.ProtoReflect(), func(msg protoreflect.Message, fd protoreflect.FieldDescriptor) {
		found = found || wantsOrg(msg, fd)
	})
	return found
}

// wantsOrg reports whether msg is an identifier whose org is empty. An
// unset oneof member is not one (setting it would change the oneof), nor
// is a message with nothing else set (an absent identifier).
func wantsOrg(msg protoreflect.Message, fd protoreflect.FieldDescriptor) bool {
	if msg.Get(fd).String() != "" || fd.ContainingOneof() != nil && !msg.Has(fd) {
		return false
	}
	other := false
	msg.Range(func(f protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		other = f != fd
		return !other
	})
	return other
}

// eachOrg calls fn for every message in m's tree that has an org field,
// skipping subtrees whose type cannot hold one (literals, structs).
func eachOrg(m protoreflect.Message, fn func(protoreflect.Message, protoreflect.FieldDescriptor)) {
	eachOrgAt(m, "", func(msg protoreflect.Message, fd protoreflect.FieldDescriptor, _ string) { fn(msg, fd) })
}

// eachOrgAt is eachOrg that also tells fn the org field's path in m
// ("project_id.organization"), for error messages.
func eachOrgAt(m protoreflect.Message, at string, fn func(protoreflect.Message, protoreflect.FieldDescriptor, string)) {
	md := m.Descriptor()
	if !mayHoldOrg(md) {
		return
	}
	if fd := orgField(md); fd != nil {
		fn(m, fd, at+string(fd.Name()))
	}
	// Fields in declaration order, not Range's: protobuf-go shuffles Range
	// per binary, and "the first org a request names" must not depend on
	// the build.
	fields := md.Fields()
	for fi := 0; fi < fields.Len(); fi++ {
		fd := fields.Get(fi)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		name := at + string(fd.Name())
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
					eachOrgAt(e.Message(), fmt.Sprintf("%s[%v].", name, k.Interface()), fn)
					return true
				})
			}
		case fd.Message() == nil:
		case fd.IsList():
			for l, j := v.List(), 0; j < l.Len(); j++ {
				eachOrgAt(l.Get(j).Message(), fmt.Sprintf("%s[%d].", name, j), fn)
			}
		default:
			eachOrgAt(v.Message(), name+".", fn)
		}
	}
}

// orgField is md's org field, nil if it has none.
func orgField(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	if notIdentifiers[md.FullName()] {
		return nil
	}
	for _, name := range []protoreflect.Name{"org", "organization"} {
		fd := md.Fields().ByName(name)
		if fd != nil && fd.Kind() == protoreflect.StringKind && fd.Cardinality() != protoreflect.Repeated {
			return fd
		}
	}
	return nil
}

var holdsOrg sync.Map // protoreflect.FullName → bool

// mayHoldOrg reports whether a message of type md can contain an org field
// anywhere below it, computed once per type.
func mayHoldOrg(md protoreflect.MessageDescriptor) bool {
	if md.ParentFile().Package() == "flyteidl2.core" {
		return false
	}
	if v, ok := holdsOrg.Load(md.FullName()); ok {
		return v.(bool)
	}
	// A full search from md on each first use: memoizing the types met
	// along the way would be wrong for types on a cycle still being searched.
	seen := map[protoreflect.FullName]bool{}
	var search func(protoreflect.MessageDescriptor) bool
	search = func(d protoreflect.MessageDescriptor) bool {
		if seen[d.FullName()] || d.ParentFile().Package() == "flyteidl2.core" {
			return false
		}
		seen[d.FullName()] = true
		if orgField(d) != nil {
			return true
		}
		fields := d.Fields()
		for j := 0; j < fields.Len(); j++ {
			f := fields.Get(j)
			if f.IsMap() {
				f = f.MapValue()
			}
			if f.Message() != nil && search(f.Message()) {
				return true
			}
		}
		return false
	}
	found := search(md)
	holdsOrg.Store(md.FullName(), found)
	return found
}
