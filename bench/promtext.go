package main

import (
	"strconv"
	"strings"
)

// sumSamples adds up the samples of metric name in a Prometheus text
// exposition, grouped by the key group returns for their labels (false:
// leave the sample out). It is just enough of the format for counters: a
// sample line is `name{label="value",...} value [timestamp]`.
func sumSamples(text, name string, group func(labels map[string]string) (string, bool)) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // a comment, another metric, or one whose name only starts alike
		}
		labels := map[string]string{}
		if rest[0] == '{' {
			if labels, rest, ok = parseLabels(rest[1:]); !ok {
				continue
			}
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		if k, keep := group(labels); keep {
			out[k] += v
		}
	}
	return out
}

// parseLabels reads `k="v",...}` and returns the labels and what follows
// the closing brace.
func parseLabels(s string) (map[string]string, string, bool) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], true
		}
		eq := strings.Index(s, `="`)
		if eq <= 0 {
			return nil, "", false
		}
		key := s[:eq]
		s = s[eq+2:]
		var v strings.Builder
		for {
			if s == "" {
				return nil, "", false
			}
			c := s[0]
			s = s[1:]
			if c == '"' {
				break
			}
			if c == '\\' && s != "" {
				switch s[0] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[0])
				}
				s = s[1:]
				continue
			}
			v.WriteByte(c)
		}
		labels[key] = v.String()
	}
}
