package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix prefixes every environment variable that overrides a key:
// server.port is FLYTE_MANAGER_SERVER_PORT; camelCase keys may also be
// spelled snake_case (FLYTE_MANAGER_SERVER_MAX_REQUEST_BYTES).
const EnvPrefix = "FLYTE_MANAGER_"

// Sources says where a Config comes from, besides defaults and environment.
type Sources struct {
	// Files are YAML files, directories (their *.yaml and *.yml files, in
	// name order) or glob patterns, merged in the order given; a later file
	// wins over an earlier one key by key.
	Files []string
	// Overrides maps key paths ("server.port") to values that win over every
	// other source: the command-line flags.
	Overrides map[string]any
}

// Load assembles, checks and returns the configuration.
func Load(src Sources) (*Config, error) {
	v := viper.New()
	keys := knownKeys()

	defaults := flatten(Default())
	for _, k := range keys.leaves {
		v.SetDefault(k, defaults[k])
		if err := v.BindEnv(append([]string{k}, envNames(k)...)...); err != nil {
			return nil, err
		}
	}

	files, err := ExpandFiles(src.Files)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		m, err := readFile(f, keys)
		if err != nil {
			return nil, err
		}
		if err := v.MergeConfigMap(m); err != nil {
			return nil, fmt.Errorf("config file %q: %w", f, err)
		}
	}

	for k, val := range src.Overrides {
		if !slices.Contains(keys.leaves, strings.ToLower(k)) {
			return nil, fmt.Errorf("unknown key %q", k)
		}
		v.Set(k, val)
	}

	var c Config
	if err := v.UnmarshalExact(&c); err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}
	if err := c.applyDerivedDefaults(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// ExpandFiles resolves --config arguments into the ordered list of files
// they name. A glob or directory matching no file is an error, as is a path
// that does not exist.
func ExpandFiles(args []string) ([]string, error) {
	var files []string
	for _, arg := range args {
		if arg == "" {
			continue
		}
		if strings.ContainsAny(arg, "*?[") {
			matches, err := filepath.Glob(arg)
			if err != nil {
				return nil, fmt.Errorf("--config %q: %w", arg, err)
			}
			if len(matches) == 0 {
				return nil, fmt.Errorf("--config %q matches no file", arg)
			}
			sort.Strings(matches)
			files = append(files, matches...)
			continue
		}
		info, err := os.Stat(arg)
		if err != nil {
			return nil, fmt.Errorf("--config %q: %w", arg, err)
		}
		if !info.IsDir() {
			files = append(files, arg)
			continue
		}
		entries, err := os.ReadDir(arg)
		if err != nil {
			return nil, fmt.Errorf("--config %q: %w", arg, err)
		}
		var inDir []string
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				inDir = append(inDir, filepath.Join(arg, e.Name()))
			}
		}
		if len(inDir) == 0 {
			return nil, fmt.Errorf("--config %q: directory holds no .yaml file", arg)
		}
		files = append(files, inDir...) // ReadDir sorts by name
	}
	return files, nil
}

// readFile parses one YAML file and rejects keys the Config does not have.
func readFile(path string, keys keySet) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config file %q: %w", path, err)
	}
	if doc == nil {
		return map[string]any{}, nil // empty file
	}
	root, ok := asMap(doc)
	if !ok {
		return nil, fmt.Errorf("config file %q: top level must be a mapping of keys", path)
	}
	var problems []error
	cleaned := checkKeys(root, "", keys, &problems)
	if len(problems) > 0 {
		return nil, fmt.Errorf("config file %q: %w", path, errors.Join(problems...))
	}
	return cleaned, nil
}

// checkKeys walks a parsed mapping, records every key that is not part of
// the Config (by its full path as written) and returns the mapping without
// null values, which mean "not set".
func checkKeys(m map[string]any, prefix string, keys keySet, problems *[]error) map[string]any {
	out := make(map[string]any, len(m))
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		val := m[k]
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		canonical := strings.ToLower(path)
		switch {
		case keys.sections[canonical]:
			if val == nil {
				continue
			}
			sub, ok := asMap(val)
			if !ok {
				*problems = append(*problems, fmt.Errorf("key %q must be a mapping", path))
				continue
			}
			out[k] = checkKeys(sub, path, keys, problems)
		case slices.Contains(keys.leaves, canonical):
			if val != nil {
				out[k] = val
			}
		default:
			*problems = append(*problems, fmt.Errorf("unknown key %q", path))
		}
	}
	return out
}

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, val := range m {
			out[fmt.Sprint(k)] = val
		}
		return out, true
	}
	return nil, false
}

// keySet is the shape of Config: lower-cased dotted paths of its sections
// (nested structs) and of its leaves (settable values).
type keySet struct {
	sections map[string]bool
	leaves   []string
}

func knownKeys() keySet {
	ks := keySet{sections: map[string]bool{}}
	walkConfig(reflect.ValueOf(Config{}), func(f configField) {
		if f.section {
			ks.sections[f.path] = true
		} else {
			ks.leaves = append(ks.leaves, f.path)
		}
	})
	return ks
}

// flatten maps every leaf of a Config value to its lower-cased path.
func flatten(c Config) map[string]any {
	out := map[string]any{}
	walkConfig(reflect.ValueOf(c), func(f configField) {
		if !f.section {
			out[f.path] = f.value.Interface()
		}
	})
	return out
}

// configField is one tagged field of Config, reached by walkConfig.
type configField struct {
	path    string // dotted and lower-cased: how keys are matched
	camel   string // dotted as the mapstructure tags spell it
	section bool   // a nested struct, whose fields are visited next
	value   reflect.Value
}

// walkConfig visits every field of v (a Config) that has a mapstructure
// tag, depth first: the one description of the configuration's shape that
// the defaults, the strict key check and the environment names are read from.
func walkConfig(v reflect.Value, visit func(configField)) {
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := range t.NumField() {
			name := t.Field(i).Tag.Get("mapstructure")
			if name == "" || name == "-" {
				continue
			}
			camel := joinKey(prefix, name)
			f := configField{path: strings.ToLower(camel), camel: camel, value: v.Field(i),
				section: t.Field(i).Type.Kind() == reflect.Struct}
			visit(f)
			if f.section {
				walk(f.value, camel)
			}
		}
	}
	walk(v, "")
}

// envNames lists the variables that override key, in order of preference.
func envNames(key string) []string {
	names := []string{EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))}
	snake := EnvPrefix + strings.ToUpper(strings.ReplaceAll(snakeCase(camelKey(key)), ".", "_"))
	if snake != names[0] {
		names = append(names, snake)
	}
	return names
}

// camelKey returns the key path as spelled in the mapstructure tags.
func camelKey(lower string) string {
	found := lower
	walkConfig(reflect.ValueOf(Config{}), func(f configField) {
		if f.path == strings.ToLower(lower) {
			found = f.camel
		}
	})
	return found
}

func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 && s[i-1] != '.' && !unicode.IsUpper(rune(s[i-1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
