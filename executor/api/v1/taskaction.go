package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ObjectName is the name of the TaskAction of action `action` in run `run`:
// "<run>-<action>", the reference's naming. Run and action names may hold
// characters a Kubernetes object name may not (upper case, '_'); such a name
// is lowered, its other characters become '-', and a hash of the original is
// appended, so two different actions never share an object.
func ObjectName(run, action string) string {
	return safe(run+"-"+action, validation.IsDNS1123Subdomain, validation.DNS1123SubdomainMaxLength)
}

// LabelValue is s as a label value: s itself when Kubernetes accepts it,
// otherwise a sanitized form with a hash of s (see ObjectName). Selectors on
// the flyte.org labels must go through it too.
func LabelValue(s string) string {
	return safe(s, validation.IsValidLabelValue, validation.LabelValueMaxLength)
}

// NamespaceName is "<project>-<domain>" as a namespace name (a DNS-1123
// label): itself when valid, otherwise lowered, every other character '-',
// cut to fit, and a hash of the exact pair appended. Project ids may hold
// upper case and '_' that a namespace may not; the hash keeps two projects
// that differ only there ("My_Proj", "my-proj") apart.
func NamespaceName(project, domain string) string {
	return safe(project+"-"+domain, validation.IsDNS1123Label, validation.DNS1123LabelMaxLength)
}

// safe returns s when valid accepts it, else a lower-cased form in which each
// character outside [a-z0-9-] is '-', trimmed to start and end with an
// alphanumeric and to fit max together with an 8-hex-digit hash of s.
func safe(s string, valid func(string) []string, max int) string {
	if len(valid(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:4])
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	body := b.String()
	if limit := max - len(suffix) - 1; len(body) > limit {
		body = body[:limit]
	}
	body = strings.Trim(body, "-")
	if body == "" {
		return suffix
	}
	return body + "-" + suffix
}

// Type is the action type, with the empty value read as a task.
func (t *TaskAction) Type() ActionType {
	if t.Spec.ActionType == "" {
		return ActionTypeTask
	}
	return t.Spec.ActionType
}

// IsRoot reports whether this is the root action of its run.
func (t *TaskAction) IsRoot() bool {
	return t.Spec.ParentActionName == nil || *t.Spec.ParentActionName == ""
}

// StandardLabels are the flyte.org labels a TaskAction carries, derived from
// its spec (values through LabelValue).
func (t *TaskAction) StandardLabels() map[string]string {
	return map[string]string{
		LabelProject:    LabelValue(t.Spec.Project),
		LabelDomain:     LabelValue(t.Spec.Domain),
		LabelRun:        LabelValue(t.Spec.RunName),
		LabelAction:     LabelValue(t.Spec.ActionName),
		LabelActionType: string(t.Type()),
		LabelIsRoot:     strconv.FormatBool(t.IsRoot()),
	}
}

// AttemptNumber is the 1-based number of the current attempt (status.attempts
// with its unset value read as the first attempt).
func (t *TaskAction) AttemptNumber() uint32 {
	if t.Status.Attempts == 0 {
		return 1
	}
	return t.Status.Attempts
}

// Condition returns the condition of type condType, or nil.
func (t *TaskAction) Condition(condType string) *metav1.Condition {
	return meta.FindStatusCondition(t.Status.Conditions, condType)
}

// SetCondition sets (or adds) the condition of type condType, stamped with
// the object's generation. The transition time changes only when the status
// does. It reports whether anything changed, so a reconciler writes the
// status only when it must.
func (t *TaskAction) SetCondition(condType string, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: t.Generation,
	})
}

// IsTerminal reports whether the action has ended: Succeeded or Failed is
// True. A terminal TaskAction never changes again.
func (t *TaskAction) IsTerminal() bool {
	return meta.IsStatusConditionTrue(t.Status.Conditions, ConditionSucceeded) ||
		meta.IsStatusConditionTrue(t.Status.Conditions, ConditionFailed)
}

// RecordPhase appends a phase change to status.phaseHistory unless it
// repeats the last entry (same phase and message); it reports whether it
// appended.
func (t *TaskAction) RecordPhase(phase, message string, at time.Time) bool {
	h := t.Status.PhaseHistory
	if n := len(h); n > 0 && h[n-1].Phase == phase && h[n-1].Message == message {
		return false
	}
	t.Status.PhaseHistory = append(h, PhaseTransition{Phase: phase, OccurredAt: metav1.NewTime(at), Message: message})
	return true
}
