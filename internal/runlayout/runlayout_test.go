package runlayout

import "testing"

func TestInputNormalisation(t *testing.T) {
	cases := []struct{ uri, file, prefix string }{
		{"/data/r1/inputs", "/data/r1/inputs/inputs.pb", "/data/r1/inputs"},
		{"/data/r1/inputs/", "/data/r1/inputs/inputs.pb", "/data/r1/inputs"},
		{"/data/r1/c1/inputs.pb", "/data/r1/c1/inputs.pb", "/data/r1/c1"},
		{"s3://bucket/r1/c1/inputs.pb", "s3://bucket/r1/c1/inputs.pb", "s3://bucket/r1/c1"},
		{"s3://bucket/offloaded/abc", "s3://bucket/offloaded/abc/inputs.pb", "s3://bucket/offloaded/abc"},
		{"file:///data/r1", "file:///data/r1/inputs.pb", "file:///data/r1"},
	}
	for _, tc := range cases {
		if got := InputFile(tc.uri); got != tc.file {
			t.Errorf("InputFile(%q) = %q, want %q", tc.uri, got, tc.file)
		}
		if got := InputPrefix(tc.uri); got != tc.prefix {
			t.Errorf("InputPrefix(%q) = %q, want %q", tc.uri, got, tc.prefix)
		}
	}
}

func TestJoinURI(t *testing.T) {
	cases := []struct {
		base  string
		elems []string
		want  string
	}{
		{"/data/r1/", []string{"a0", "1"}, "/data/r1/a0/1"},
		{"/", []string{"x"}, "/x"},
		{"", []string{"x", "y"}, "x/y"},
		{"rel", []string{"/x/", ""}, "rel/x"},
		{"s3://bucket", []string{"r1", "a0/"}, "s3://bucket/r1/a0"},
		{"file:///d", []string{"inputs.pb"}, "file:///d/inputs.pb"},
	}
	for _, tc := range cases {
		if got := JoinURI(tc.base, tc.elems...); got != tc.want {
			t.Errorf("JoinURI(%q, %q) = %q, want %q", tc.base, tc.elems, got, tc.want)
		}
	}
}

func TestKeys(t *testing.T) {
	if got, want := RunBaseKey("", "p", "d", "r1"), "runs/_/p/d/r1"; got != want {
		t.Errorf("RunBaseKey with no org = %q, want %q", got, want)
	}
	if got, want := RunBaseKey("o", "p", "d", "r1"), "runs/o/p/d/r1"; got != want {
		t.Errorf("RunBaseKey = %q, want %q", got, want)
	}
	if got, want := RunBaseUnder("s3://b/pre/", "", "p", "d", "r1"), "s3://b/pre/_/p/d/r1"; got != want {
		t.Errorf("RunBaseUnder = %q, want %q", got, want)
	}
	if got, want := OffloadedInputsDir("o", "p", "d"), "offloaded-inputs/o/p/d"; got != want {
		t.Errorf("OffloadedInputsDir = %q, want %q", got, want)
	}
	if got, want := AttemptDir("s3://b/runs/_/p/d/r1/", "a0", 2), "s3://b/runs/_/p/d/r1/a0/2"; got != want {
		t.Errorf("AttemptDir = %q, want %q", got, want)
	}
}

// IsAttemptKeyIn accepts a project/domain's own attempt directories only:
// not another project's, domain's or org's, not a shallower or deeper key
// (a run whose run_base_dir lies below this project's runs/ prefix), not a
// lookalike domain.
func TestIsAttemptKeyIn(t *testing.T) {
	for key, want := range map[string]bool{
		"runs/_/p/development/r1/a0/0":                        true,
		"runs/_/p/development/r1/abc123/12":                   true,
		"runs/_/q/development/r1/a0/0":                        false,
		"runs/_/p/production/r1/a0/0":                         false,
		"runs/o/p/development/r1/a0/0":                        false,
		"runs/_/p/development2/r1/a0/0":                       false,
		"runs/_/p/development/r1":                             false,
		"runs/_/p/development/r1/a0":                          false,
		"runs/_/p/development/r1/a0/x":                        false,
		"runs/_/p/development/r1//0":                          false,
		"runs/_/p/development/r1/a0/0/outputs.pb":             false,
		"runs/_/p/development/x/_/q/development/r1/a0/0":      false,
		"offloaded-inputs/_/p/development/abc":                false,
		"elsewhere/runs/_/p/development/r1/a0/0":              false,
		"runs/_/p/development/r1/a0/0/../../../../q/dev/r/a0": false,
	} {
		if got := IsAttemptKeyIn(key, "", "p", "development"); got != want {
			t.Errorf("IsAttemptKeyIn(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestAttemptLogDirIsUnderTheRunBase(t *testing.T) {
	base := RunBaseKey("", "p", "d", "r1")
	if got, want := AttemptLogDir(base, "a0", 2), "runs/_/p/d/r1/a0/2/_logs"; got != want {
		t.Errorf("AttemptLogDir = %q, want %q", got, want)
	}
	if got, want := AttemptLogDir("s3://b/x/p/d/r1/", "a0", 1), "s3://b/x/p/d/r1/a0/1/_logs"; got != want {
		t.Errorf("AttemptLogDir = %q, want %q", got, want)
	}
}
