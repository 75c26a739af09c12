package kube

import (
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"gorm.io/gorm"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
)

// The kubernetes driver's attempts are traced by the shared core, as the
// local driver's are: one span per Pod attempt with its run, action and
// phases.
func TestAttemptSpansOnKubernetes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := newHarnessWith(t, dbtest.SQLiteDSN(t), func(*gorm.DB) attempt.Hooks { return attempt.Hooks{Tracer: tp.Tracer("test")} })
	key := h.run("traced", succeed, taskOpts{})
	h.terminal(key, phase.Succeeded)

	var span sdktrace.ReadOnlySpan
	h.eventually("the attempt's span", func() bool {
		for _, s := range rec.Ended() {
			if slices.Contains(s.Attributes(), attribute.String("flyte.run", key.RunName)) {
				span = s
			}
		}
		return span != nil
	})
	for _, want := range []attribute.KeyValue{attribute.String("flyte.action", key.Name), attribute.Int64("flyte.attempt", 1), attribute.String("flyte.phase", "SUCCEEDED")} {
		if !slices.Contains(span.Attributes(), want) {
			t.Errorf("attempt span lacks %s=%s: %v", want.Key, want.Value.Emit(), span.Attributes())
		}
	}
	var events []string
	for _, e := range span.Events() {
		events = append(events, e.Name)
	}
	if len(events) < 3 || events[0] != "QUEUED" || !slices.Contains(events, "RUNNING") || events[len(events)-1] != "SUCCEEDED" {
		t.Errorf("attempt span events %v, want QUEUED ... RUNNING ... SUCCEEDED", events)
	}
}
