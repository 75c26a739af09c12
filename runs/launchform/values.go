package launchform

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
)

// null is how a form spells None (a value of its own, so that a default
// of None is told apart from no default).
func null() map[string]any { return map[string]any{"type": "null"} }

func isNull(v any) bool {
	if v == nil {
		return true
	}
	m, ok := v.(map[string]any)
	return ok && len(m) == 1 && m["type"] == "null"
}

// Value is the JSON value of a literal, as the form shows and edits it.
func Value(lit *core.Literal) (any, error) {
	switch v := lit.GetValue().(type) {
	case *core.Literal_Scalar:
		return scalarValue(v.Scalar)
	case *core.Literal_Collection:
		out := make([]any, len(v.Collection.GetLiterals()))
		for i, l := range v.Collection.GetLiterals() {
			x, err := Value(l)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = x
		}
		return out, nil
	case *core.Literal_Map:
		out := map[string]any{}
		for _, k := range sortedKeys(v.Map.GetLiterals()) {
			x, err := Value(v.Map.GetLiterals()[k])
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k, err)
			}
			out[k] = x
		}
		return out, nil
	case *core.Literal_OffloadedMetadata:
		return nil, fmt.Errorf("an offloaded literal (%s) cannot be shown in a form", v.OffloadedMetadata.GetUri())
	}
	return nil, fmt.Errorf("an empty literal has no value")
}

func scalarValue(s *core.Scalar) (any, error) {
	switch v := s.GetValue().(type) {
	case *core.Scalar_Primitive:
		switch p := v.Primitive.GetValue().(type) {
		case *core.Primitive_StringValue:
			return p.StringValue, nil
		case *core.Primitive_Integer:
			return p.Integer, nil
		case *core.Primitive_FloatValue:
			if math.IsNaN(p.FloatValue) || math.IsInf(p.FloatValue, 0) {
				return strconv.FormatFloat(p.FloatValue, 'g', -1, 64), nil // JSON has no NaN or infinities
			}
			return p.FloatValue, nil
		case *core.Primitive_Boolean:
			return p.Boolean, nil
		case *core.Primitive_Datetime:
			return p.Datetime.AsTime().Format(time.RFC3339Nano), nil
		case *core.Primitive_Duration:
			return p.Duration.AsDuration().String(), nil
		}
		return nil, fmt.Errorf("an empty primitive has no value")
	case *core.Scalar_Binary:
		if decoded, err := decodeMsgpack(v.Binary.GetValue()); err == nil && len(v.Binary.GetValue()) > 0 {
			return decoded, nil
		}
		return base64.StdEncoding.EncodeToString(v.Binary.GetValue()), nil
	case *core.Scalar_Generic:
		return v.Generic.AsMap(), nil
	case *core.Scalar_Union:
		return Value(v.Union.GetValue())
	case *core.Scalar_Blob:
		dim := dimSingle
		if v.Blob.GetMetadata().GetType().GetDimensionality() == core.BlobType_MULTIPART {
			dim = dimMultipart
		}
		return map[string]any{"uri": v.Blob.GetUri(), "format": v.Blob.GetMetadata().GetType().GetFormat(), "dimensionality": dim}, nil
	case *core.Scalar_StructuredDataset:
		return map[string]any{"uri": v.StructuredDataset.GetUri(), "format": v.StructuredDataset.GetMetadata().GetStructuredDatasetType().GetFormat()}, nil
	case *core.Scalar_NoneType:
		return null(), nil
	case *core.Scalar_Error:
		return v.Error.GetMessage(), nil
	}
	return nil, fmt.Errorf("this kind of scalar cannot be shown in a form")
}

// Literals turns JSON values into literals of vars (JsonValuesToLiterals):
// every input needs a value but an optional one, which is None when left
// out. Values of no input are ignored (they may come from another version
// of the task). An error names the input.
func Literals(vars *core.VariableMap, values map[string]any) ([]*task.NamedLiteral, error) {
	var out []*task.NamedLiteral
	for _, e := range vars.GetVariables() {
		name, lt := e.GetKey(), e.GetValue().GetType()
		v, ok := values[name]
		if !ok {
			none := noneOf(lt)
			if none == nil {
				return nil, fmt.Errorf("input %q: a value is required", name)
			}
			out = append(out, &task.NamedLiteral{Name: name, Value: none})
			continue
		}
		lit, err := Literal(v, lt)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		out = append(out, &task.NamedLiteral{Name: name, Value: lit})
	}
	return out, nil
}

// FormLiterals turns a filled launch form (its properties' defaults are
// the values) into literals (LaunchFormJsonToLiterals). A property with
// no value is None if it is optional and left out otherwise.
func FormLiterals(form map[string]any) ([]*task.NamedLiteral, error) {
	props, ok := form["properties"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the form has no properties object")
	}
	var out []*task.NamedLiteral
	for _, name := range sortedKeys(props) {
		schema, ok := props[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("input %q: its schema is not an object", name)
		}
		lt, err := SchemaType(schema)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		v, has := formValue(schema)
		var lit *core.Literal
		switch {
		case has:
			if lit, err = Literal(v, lt); err != nil {
				return nil, fmt.Errorf("input %q: %w", name, err)
			}
		case optional(schema):
			lit = noneOf(lt)
		default:
			continue
		}
		out = append(out, &task.NamedLiteral{Name: name, Value: lit})
	}
	return out, nil
}

// formValue is a property's value: its default, else for a blob or a
// struct the defaults of its nested properties.
func formValue(schema map[string]any) (any, bool) {
	if v, ok := schema["default"]; ok {
		return v, true
	}
	props, _ := schema["properties"].(map[string]any)
	if schema["type"] != "object" || props == nil || schema["format"] == "structured-dataset" {
		return nil, false
	}
	if schema["format"] == "blob" {
		p, _ := props["uri"].(map[string]any)
		if uri, _ := p["default"].(string); uri == "" {
			return nil, false // a blob left empty has no value
		}
	}
	out := map[string]any{}
	for k, p := range props {
		if m, ok := p.(map[string]any); ok {
			if v, ok := formValue(m); ok {
				out[k] = v
			}
		}
	}
	return out, len(out) > 0
}

// noneOf is None as a value of lt, if lt is optional (a union with None).
func noneOf(lt *core.LiteralType) *core.Literal {
	for _, v := range lt.GetUnionType().GetVariants() {
		if v.GetSimple() == core.SimpleType_NONE && v.GetType() != nil {
			if _, ok := v.GetType().(*core.LiteralType_Simple); ok {
				return unionOf(v, scalar(&core.Scalar{Value: &core.Scalar_NoneType{NoneType: &core.Void{}}}))
			}
		}
	}
	return nil
}

func scalar(s *core.Scalar) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: s}}
}

func primitive(p *core.Primitive) *core.Literal {
	return scalar(&core.Scalar{Value: &core.Scalar_Primitive{Primitive: p}})
}

// unionOf wraps lit as the variant of a union; the variant's structure tag
// is how the SDK picks the Python type back.
func unionOf(variant *core.LiteralType, lit *core.Literal) *core.Literal {
	t := &core.LiteralType{Type: variant.GetType(), Metadata: variant.GetMetadata(), Structure: &core.TypeStructure{Tag: variant.GetStructure().GetTag()}}
	return scalar(&core.Scalar{Value: &core.Scalar_Union{Union: &core.Union{Type: t, Value: lit}}})
}

// Literal is the literal of type lt holding the JSON value v.
func Literal(v any, lt *core.LiteralType) (*core.Literal, error) {
	if u := lt.GetUnionType(); u != nil {
		return unionLiteral(v, u)
	}
	if isNull(v) {
		if lt.GetSimple() == core.SimpleType_NONE && lt.GetType() != nil {
			return scalar(&core.Scalar{Value: &core.Scalar_NoneType{NoneType: &core.Void{}}}), nil
		}
		return nil, fmt.Errorf("null is not a value of this type (only of an optional one)")
	}
	switch t := lt.GetType().(type) {
	case *core.LiteralType_Simple:
		return simpleLiteral(v, t.Simple)
	case *core.LiteralType_CollectionType:
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("want a list, got %s", kindOf(v))
		}
		c := &core.LiteralCollection{}
		for i, x := range list {
			l, err := Literal(x, t.CollectionType)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			c.Literals = append(c.Literals, l)
		}
		return &core.Literal{Value: &core.Literal_Collection{Collection: c}}, nil
	case *core.LiteralType_MapValueType:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("want an object, got %s", kindOf(v))
		}
		lm := &core.LiteralMap{Literals: map[string]*core.Literal{}}
		for _, k := range sortedKeys(m) {
			l, err := Literal(m[k], t.MapValueType)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k, err)
			}
			lm.Literals[k] = l
		}
		return &core.Literal{Value: &core.Literal_Map{Map: lm}}, nil
	case *core.LiteralType_EnumType:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want one of %q, got %s", t.EnumType.GetValues(), kindOf(v))
		}
		for _, e := range t.EnumType.GetValues() {
			if e == s {
				return primitive(&core.Primitive{Value: &core.Primitive_StringValue{StringValue: s}}), nil
			}
		}
		return nil, fmt.Errorf("%q is not one of %q", s, t.EnumType.GetValues())
	case *core.LiteralType_Blob:
		return blobLiteral(v, t.Blob)
	case *core.LiteralType_StructuredDatasetType:
		m, ok := v.(map[string]any)
		uri, _ := m["uri"].(string)
		if !ok || uri == "" {
			return nil, fmt.Errorf("a dataset needs an object with its uri")
		}
		format, _ := m["format"].(string)
		if format == "" {
			format = t.StructuredDatasetType.GetFormat()
		}
		return scalar(&core.Scalar{Value: &core.Scalar_StructuredDataset{StructuredDataset: &core.StructuredDataset{
			Uri: uri, Metadata: &core.StructuredDatasetMetadata{StructuredDatasetType: &core.StructuredDatasetType{Format: format}},
		}}}), nil
	}
	return nil, fmt.Errorf("this type cannot be given in a form")
}

func simpleLiteral(v any, s core.SimpleType) (*core.Literal, error) {
	switch s {
	case core.SimpleType_STRING:
		if str, ok := v.(string); ok {
			return primitive(&core.Primitive{Value: &core.Primitive_StringValue{StringValue: str}}), nil
		}
	case core.SimpleType_INTEGER:
		switch n := v.(type) {
		case float64:
			if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
				return nil, fmt.Errorf("want an integer, got %v", n)
			}
			return primitive(&core.Primitive{Value: &core.Primitive_Integer{Integer: int64(n)}}), nil
		case int64:
			return primitive(&core.Primitive{Value: &core.Primitive_Integer{Integer: n}}), nil
		}
	case core.SimpleType_FLOAT:
		switch n := v.(type) {
		case float64:
			return primitive(&core.Primitive{Value: &core.Primitive_FloatValue{FloatValue: n}}), nil
		case int64:
			return primitive(&core.Primitive{Value: &core.Primitive_FloatValue{FloatValue: float64(n)}}), nil
		case string: // how Value shows NaN and infinities
			if f, err := strconv.ParseFloat(n, 64); err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
				return primitive(&core.Primitive{Value: &core.Primitive_FloatValue{FloatValue: f}}), nil
			}
		}
	case core.SimpleType_BOOLEAN:
		if b, ok := v.(bool); ok {
			return primitive(&core.Primitive{Value: &core.Primitive_Boolean{Boolean: b}}), nil
		}
	case core.SimpleType_DATETIME:
		if str, ok := v.(string); ok {
			t, err := time.Parse(time.RFC3339Nano, str)
			if err != nil {
				return nil, fmt.Errorf("want an RFC 3339 time such as 2025-01-31T12:00:00Z, got %q", str)
			}
			return primitive(&core.Primitive{Value: &core.Primitive_Datetime{Datetime: timestamppb.New(t)}}), nil
		}
	case core.SimpleType_DURATION:
		d, err := duration(v)
		if err != nil {
			return nil, err
		}
		return primitive(&core.Primitive{Value: &core.Primitive_Duration{Duration: durationpb.New(d)}}), nil
	case core.SimpleType_STRUCT:
		// Dataclasses, pydantic models and dicts: the SDK reads a Generic
		// struct as the JSON of the object.
		if m, ok := v.(map[string]any); ok {
			st, err := structpb.NewStruct(m)
			if err != nil {
				return nil, err
			}
			return scalar(&core.Scalar{Value: &core.Scalar_Generic{Generic: st}}), nil
		}
		return nil, fmt.Errorf("want an object, got %s", kindOf(v))
	case core.SimpleType_BINARY:
		if str, ok := v.(string); ok {
			raw, err := base64.StdEncoding.DecodeString(str)
			if err != nil {
				return nil, fmt.Errorf("want base64 bytes")
			}
			return scalar(&core.Scalar{Value: &core.Scalar_Binary{Binary: &core.Binary{Value: raw}}}), nil
		}
	default:
		return nil, fmt.Errorf("a %v cannot be given in a form", s)
	}
	return nil, fmt.Errorf("want %s, got %s", wantOf(s), kindOf(v))
}

// duration reads "1h30m" (Go's form, which Value writes), or seconds as a
// number or a string of digits.
func duration(v any) (time.Duration, error) {
	switch d := v.(type) {
	case float64:
		return time.Duration(d * float64(time.Second)), nil
	case string:
		if n, err := strconv.ParseInt(d, 10, 64); err == nil {
			return time.Duration(n) * time.Second, nil
		}
		if x, err := time.ParseDuration(d); err == nil {
			return x, nil
		}
		return 0, fmt.Errorf("want a duration such as 1h30m or a number of seconds, got %q", d)
	}
	return 0, fmt.Errorf("want a duration such as 1h30m, got %s", kindOf(v))
}

func blobLiteral(v any, bt *core.BlobType) (*core.Literal, error) {
	var uri, format string
	dim := bt.GetDimensionality()
	switch b := v.(type) {
	case string:
		uri, format = b, bt.GetFormat()
	case map[string]any:
		uri, _ = b["uri"].(string)
		format, _ = b["format"].(string)
		switch b["dimensionality"] {
		case dimSingle, float64(0):
			dim = core.BlobType_SINGLE
		case dimMultipart, float64(1):
			dim = core.BlobType_MULTIPART
		case nil:
		default:
			return nil, fmt.Errorf("dimensionality must be %s or %s", dimSingle, dimMultipart)
		}
	default:
		return nil, fmt.Errorf("want a file or directory as its uri, got %s", kindOf(v))
	}
	if uri == "" {
		return nil, fmt.Errorf("a file or directory needs its uri")
	}
	return scalar(&core.Scalar{Value: &core.Scalar_Blob{Blob: &core.Blob{
		Uri: uri, Metadata: &core.BlobMetadata{Type: &core.BlobType{Format: format, Dimensionality: dim}},
	}}}), nil
}

// unionLiteral picks the first variant v is a value of (None for null).
func unionLiteral(v any, u *core.UnionType) (*core.Literal, error) {
	if isNull(v) {
		for _, variant := range u.GetVariants() {
			if _, ok := variant.GetType().(*core.LiteralType_Simple); ok && variant.GetSimple() == core.SimpleType_NONE {
				return unionOf(variant, scalar(&core.Scalar{Value: &core.Scalar_NoneType{NoneType: &core.Void{}}})), nil
			}
		}
		return nil, fmt.Errorf("null is not a value of this union (it has no None)")
	}
	var reasons []string
	for _, variant := range u.GetVariants() {
		if _, ok := variant.GetType().(*core.LiteralType_Simple); ok && variant.GetSimple() == core.SimpleType_NONE {
			continue
		}
		lit, err := Literal(v, variant)
		if err == nil {
			return unionOf(variant, lit), nil
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", variantTitle(variant), err))
	}
	return nil, fmt.Errorf("the value fits no variant (%v)", reasons)
}

func wantOf(s core.SimpleType) string {
	return map[core.SimpleType]string{
		core.SimpleType_STRING: "a string", core.SimpleType_INTEGER: "an integer", core.SimpleType_FLOAT: "a number",
		core.SimpleType_BOOLEAN: "true or false", core.SimpleType_DATETIME: "an RFC 3339 time", core.SimpleType_BINARY: "base64 bytes",
	}[s]
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, int64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
