// Package launchform translates between a task's typed interface and the
// JSON a launch form works with (TranslatorService): a JSON Schema of the
// inputs that carries every literal type (so the form alone is enough to
// turn its values back into literals), the JSON value of a literal, and
// the literal of a JSON value.
//
// The shape is the one the official Flyte 2 console reads (a react-jsonschema-form
// schema); see "Launch forms" in docs/console.md for it.
package launchform

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/types/known/structpb"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
)

// FormTitle is the title of every launch form's root schema.
const FormTitle = "Launch Form"

// Blob dimensionality as the form spells it.
const (
	dimSingle    = "SINGLE"
	dimMultipart = "MULTIPART"
)

// Form is the launch form of vars: one property per input with its type,
// description and, where defaults has one, its default value; inputs
// without a default that cannot be left out (not optional) are required.
func Form(vars *core.VariableMap, defaults map[string]*core.Literal) (*structpb.Struct, error) {
	props := map[string]any{}
	required := []any{}
	for _, e := range vars.GetVariables() {
		name := e.GetKey()
		var def any
		if lit := defaults[name]; lit != nil {
			v, err := Value(lit)
			if err != nil {
				return nil, fmt.Errorf("input %q: default: %w", name, err)
			}
			def = v
		}
		field, req, err := fieldSchema(name, e.GetValue(), def, defaults[name] != nil)
		if err != nil {
			return nil, err
		}
		props[name] = field
		if req {
			required = append(required, name)
		}
	}
	root := map[string]any{"type": "object", "title": FormTitle, "properties": props, "required": required}
	s, err := structpb.NewStruct(root)
	if err != nil {
		return nil, fmt.Errorf("launch form: %w", err)
	}
	return s, nil
}

// TaskForm is the launch form of a task: its inputs with the defaults its
// spec declares.
func TaskForm(spec *task.TaskSpec) (*structpb.Struct, error) {
	defaults := map[string]*core.Literal{}
	for _, p := range spec.GetDefaultInputs() {
		if d := p.GetParameter().GetDefault(); d != nil {
			defaults[p.GetName()] = d
		}
	}
	return Form(spec.GetTaskTemplate().GetInterface().GetInputs(), defaults)
}

// LiteralsForm is the launch form of vars filled with literals as the
// defaults (a run's inputs, to launch it again). Literals of no variable
// are left out: the form may be for another version of the task.
func LiteralsForm(vars *core.VariableMap, literals []*task.NamedLiteral) (*structpb.Struct, error) {
	known := map[string]bool{}
	for _, e := range vars.GetVariables() {
		known[e.GetKey()] = true
	}
	defaults := map[string]*core.Literal{}
	for _, l := range literals {
		if known[l.GetName()] {
			defaults[l.GetName()] = l.GetValue()
		}
	}
	// Only the inputs there are values for, as a relaunch shows them.
	shown := &core.VariableMap{}
	for _, e := range vars.GetVariables() {
		if defaults[e.GetKey()] != nil {
			shown.Variables = append(shown.Variables, e)
		}
	}
	return Form(shown, defaults)
}

// fieldSchema is one input's property: its type's schema, its description
// (when it says more than the name) and its default. A blob's default goes
// into its nested properties, where the form edits it. The input is
// required unless it has a default or is optional (a union with None).
func fieldSchema(name string, v *core.Variable, def any, hasDefault bool) (map[string]any, bool, error) {
	field, err := TypeSchema(v.GetType())
	if err != nil {
		return nil, false, fmt.Errorf("input %q: %w", name, err)
	}
	if d := v.GetDescription(); d != "" && d != name {
		field["description"] = d
	}
	if def != nil {
		if field["format"] == "blob" {
			setBlobDefaults(field, def)
		} else {
			field["default"] = def
		}
	}
	return field, !hasDefault && !optional(field), nil
}

func setBlobDefaults(field map[string]any, def any) {
	m, ok := def.(map[string]any)
	props, _ := field["properties"].(map[string]any)
	if !ok || props == nil {
		return
	}
	for _, k := range []string{"uri", "format", "dimensionality"} {
		if p, ok := props[k].(map[string]any); ok && m[k] != nil {
			p["default"] = m[k]
		}
	}
}

// optional reports whether a schema is a union with a None variant.
func optional(schema map[string]any) bool {
	variants, _ := schema["oneOf"].([]any)
	for _, v := range variants {
		if m, ok := v.(map[string]any); ok && m["type"] == "null" {
			return true
		}
	}
	return false
}

// TypeSchema is the JSON Schema of a literal type, carrying what
// SchemaType needs to rebuild the type.
func TypeSchema(lt *core.LiteralType) (map[string]any, error) {
	if lt == nil {
		return map[string]any{"type": "null"}, nil
	}
	switch t := lt.GetType().(type) {
	case *core.LiteralType_Simple:
		return simpleSchema(t.Simple, lt.GetMetadata())
	case *core.LiteralType_Blob:
		dim := dimSingle
		if t.Blob.GetDimensionality() == core.BlobType_MULTIPART {
			dim = dimMultipart
		}
		return map[string]any{"type": "object", "format": "blob", "properties": map[string]any{
			"uri":            map[string]any{"type": "string", "default": ""},
			"format":         map[string]any{"type": "string", "default": t.Blob.GetFormat()},
			"dimensionality": map[string]any{"type": "string", "enum": []any{dimSingle, dimMultipart}, "default": dim},
		}}, nil
	case *core.LiteralType_CollectionType:
		items, err := TypeSchema(t.CollectionType)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case *core.LiteralType_MapValueType:
		values, err := TypeSchema(t.MapValueType)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": values}, nil
	case *core.LiteralType_EnumType:
		values := make([]any, len(t.EnumType.GetValues()))
		for i, v := range t.EnumType.GetValues() {
			values[i] = v
		}
		return map[string]any{"type": "string", "enum": values}, nil
	case *core.LiteralType_StructuredDatasetType:
		return map[string]any{"type": "object", "format": "structured-dataset", "properties": map[string]any{
			"uri": map[string]any{"type": "string"}, "format": map[string]any{"type": "string"},
		}}, nil
	case *core.LiteralType_UnionType:
		variants := make([]any, 0, len(t.UnionType.GetVariants()))
		for _, v := range t.UnionType.GetVariants() {
			s, err := TypeSchema(v)
			if err != nil {
				return nil, err
			}
			s["title"] = variantTitle(v)
			s["structure"] = v.GetStructure().GetTag()
			variants = append(variants, s)
		}
		return map[string]any{"oneOf": variants, "format": "union"}, nil
	}
	return nil, fmt.Errorf("type %v has no launch form representation", lt)
}

func simpleSchema(s core.SimpleType, md *structpb.Struct) (map[string]any, error) {
	switch s {
	case core.SimpleType_NONE:
		return map[string]any{"type": "null"}, nil
	case core.SimpleType_STRING:
		return map[string]any{"type": "string"}, nil
	case core.SimpleType_INTEGER:
		return map[string]any{"type": "integer"}, nil
	case core.SimpleType_FLOAT:
		return map[string]any{"type": "number", "format": "float"}, nil
	case core.SimpleType_BOOLEAN:
		return map[string]any{"type": "boolean"}, nil
	case core.SimpleType_DATETIME:
		return map[string]any{"type": "string", "format": "datetime"}, nil
	case core.SimpleType_DURATION:
		return map[string]any{"type": "string", "format": "duration"}, nil
	case core.SimpleType_BINARY:
		return map[string]any{"type": "string", "format": "binary"}, nil
	case core.SimpleType_ERROR:
		return map[string]any{"type": "string", "format": "error"}, nil
	case core.SimpleType_STRUCT:
		// A dataclass or pydantic model: the SDK attaches its JSON schema
		// as the type's metadata; the form is that schema, its title
		// (the class name) kept as "dataclass".
		if md != nil {
			m := md.AsMap()
			if title, ok := m["title"]; ok {
				m["dataclass"] = title
				delete(m, "title")
			}
			delete(m, "additionalProperties")
			if _, ok := m["type"]; !ok {
				m["type"] = "object"
			}
			return m, nil
		}
		// No schema (e.g. dict[int, int]): any object.
		return map[string]any{"type": "object", "additionalProperties": true}, nil
	}
	return nil, fmt.Errorf("simple type %v has no launch form representation", s)
}

func variantTitle(lt *core.LiteralType) string {
	switch t := lt.GetType().(type) {
	case *core.LiteralType_Simple:
		if t.Simple == core.SimpleType_STRUCT {
			if title, ok := lt.GetMetadata().AsMap()["title"].(string); ok {
				return title
			}
			return "object"
		}
		return map[core.SimpleType]string{
			core.SimpleType_STRING: "string", core.SimpleType_INTEGER: "integer", core.SimpleType_FLOAT: "number",
			core.SimpleType_BOOLEAN: "boolean", core.SimpleType_DATETIME: "datetime", core.SimpleType_DURATION: "duration",
			core.SimpleType_BINARY: "binary", core.SimpleType_NONE: "none", core.SimpleType_ERROR: "error",
		}[t.Simple]
	case *core.LiteralType_CollectionType:
		return "array"
	case *core.LiteralType_MapValueType:
		return "object"
	case *core.LiteralType_Blob:
		return "blob"
	case *core.LiteralType_EnumType:
		return "enum"
	case *core.LiteralType_StructuredDatasetType:
		return "structured_dataset"
	case *core.LiteralType_UnionType:
		return "union"
	}
	return "unknown"
}

// SchemaType rebuilds the literal type a property's schema was made from
// (TypeSchema's inverse).
func SchemaType(schema map[string]any) (*core.LiteralType, error) {
	if variants, ok := schema["oneOf"]; ok {
		list, ok := variants.([]any)
		if !ok {
			return nil, fmt.Errorf("oneOf must be a list of schemas")
		}
		u := &core.UnionType{}
		for i, v := range list {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("oneOf[%d] is not a schema", i)
			}
			vt, err := SchemaType(m)
			if err != nil {
				return nil, fmt.Errorf("oneOf[%d]: %w", i, err)
			}
			if tag, _ := m["structure"].(string); tag != "" {
				vt.Structure = &core.TypeStructure{Tag: tag}
			}
			u.Variants = append(u.Variants, vt)
		}
		return &core.LiteralType{Type: &core.LiteralType_UnionType{UnionType: u}}, nil
	}
	simple := func(s core.SimpleType) *core.LiteralType {
		return &core.LiteralType{Type: &core.LiteralType_Simple{Simple: s}}
	}
	typ, _ := schema["type"].(string)
	format, _ := schema["format"].(string)
	switch typ {
	case "string":
		if enum, ok := schema["enum"].([]any); ok {
			values := make([]string, len(enum))
			for i, v := range enum {
				values[i] = fmt.Sprint(v)
			}
			return &core.LiteralType{Type: &core.LiteralType_EnumType{EnumType: &core.EnumType{Values: values}}}, nil
		}
		switch format {
		case "datetime", "date-time":
			return simple(core.SimpleType_DATETIME), nil
		case "duration":
			return simple(core.SimpleType_DURATION), nil
		case "binary":
			return simple(core.SimpleType_BINARY), nil
		case "error":
			return simple(core.SimpleType_ERROR), nil
		}
		return simple(core.SimpleType_STRING), nil
	case "integer":
		return simple(core.SimpleType_INTEGER), nil
	case "number":
		return simple(core.SimpleType_FLOAT), nil
	case "boolean":
		return simple(core.SimpleType_BOOLEAN), nil
	case "null":
		return simple(core.SimpleType_NONE), nil
	case "array":
		items, ok := schema["items"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("an array schema needs items")
		}
		it, err := SchemaType(items)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		return &core.LiteralType{Type: &core.LiteralType_CollectionType{CollectionType: it}}, nil
	case "object":
		return objectType(schema, format)
	}
	return nil, fmt.Errorf("schema type %q is not one a launch form uses", typ)
}

func objectType(schema map[string]any, format string) (*core.LiteralType, error) {
	props, _ := schema["properties"].(map[string]any)
	nestedDefault := func(key string) string {
		p, _ := props[key].(map[string]any)
		s, _ := p["default"].(string)
		return s
	}
	switch format {
	case "blob":
		bt := &core.BlobType{Format: nestedDefault("format")}
		if nestedDefault("dimensionality") == dimMultipart {
			bt.Dimensionality = core.BlobType_MULTIPART
		}
		return &core.LiteralType{Type: &core.LiteralType_Blob{Blob: bt}}, nil
	case "structured-dataset":
		return &core.LiteralType{Type: &core.LiteralType_StructuredDatasetType{StructuredDatasetType: &core.StructuredDatasetType{Format: nestedDefault("format")}}}, nil
	}
	if values, ok := schema["additionalProperties"].(map[string]any); ok {
		vt, err := SchemaType(values)
		if err != nil {
			return nil, fmt.Errorf("additionalProperties: %w", err)
		}
		return &core.LiteralType{Type: &core.LiteralType_MapValueType{MapValueType: vt}}, nil
	}
	// A dataclass, pydantic model or untyped dict: a struct whose schema
	// (without the form's own keys) is the type's metadata again.
	md := maps.Clone(schema)
	if name, ok := md["dataclass"]; ok {
		md["title"] = name
		delete(md, "dataclass")
	}
	for _, k := range []string{"default", "description", "structure"} {
		delete(md, k)
	}
	lt := &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_STRUCT}}
	if len(props) > 0 || md["title"] != nil {
		s, err := structpb.NewStruct(md)
		if err != nil {
			return nil, err
		}
		lt.Metadata = s
	}
	return lt, nil
}

// sortedKeys is m's keys in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
