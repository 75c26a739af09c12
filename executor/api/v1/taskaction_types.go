package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ActionType says what a TaskAction runs: a task (one Pod per attempt) or a
// condition (no Pod: the action waits for a signal value or its timeout).
// +kubebuilder:validation:Enum=task;condition
type ActionType string

const (
	// ActionTypeTask runs spec.taskTemplate; it is also what an empty
	// actionType means.
	ActionTypeTask ActionType = "task"
	// ActionTypeCondition waits for status.signalValue to be set.
	ActionTypeCondition ActionType = "condition"
)

// TaskActionSpec is what the manager asks the executor to run. It is written
// once, when the manager enqueues the action, and never changed afterwards:
// everything the executor learns goes into the status.
type TaskActionSpec struct {
	// RunName is the run this action belongs to (the run's name in the API).
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=30
	RunName string `json:"runName"`

	// Project of the run.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Project string `json:"project"`

	// Domain of the run (development, staging, production...).
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Domain string `json:"domain"`

	// ActionName is the action's name within its run; the root action is a0.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=30
	ActionName string `json:"actionName"`

	// ParentActionName is the action that started this one; unset for the
	// root action of a run.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=30
	ParentActionName *string `json:"parentActionName,omitempty"`

	// ActionType selects the task or the condition path of the reconciler;
	// empty means task.
	// +optional
	ActionType ActionType `json:"actionType,omitempty"`

	// ConditionSpec is the serialized flyteidl2 ConditionAction of a
	// condition action (which output type it waits for, its timeout).
	// +optional
	ConditionSpec []byte `json:"conditionSpec,omitempty"`

	// InputURI is where the action's inputs.pb lives; the Pod reads its inputs
	// from the directory that holds it.
	// +optional
	InputURI string `json:"inputUri,omitempty"`

	// RunOutputBase is the run's output prefix; each attempt writes below it
	// (outputs.pb, error.pb, checkpoints).
	// +optional
	RunOutputBase string `json:"runOutputBase,omitempty"`

	// CacheKey identifies the cached outputs of a discoverable task; empty
	// when the task is not cached.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	CacheKey string `json:"cacheKey,omitempty"`

	// TaskType is the TaskTemplate's type (python, container,
	// raw-container...); it selects the plugin that builds the Pod.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	TaskType string `json:"taskType,omitempty"`

	// ShortName is the task's display name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ShortName string `json:"shortName,omitempty"`

	// TaskTemplate is the serialized flyteidl2.core.TaskTemplate to run
	// (base64 in YAML and JSON).
	// +optional
	TaskTemplate []byte `json:"taskTemplate,omitempty"`

	// EnvVars are added to the task's environment; they never override the
	// variables of the task-process contract.
	// +optional
	EnvVars map[string]string `json:"envVars,omitempty"`

	// Interruptible lets the Pod run on preemptible capacity; unset means the
	// task's own setting.
	// +optional
	Interruptible *bool `json:"interruptible,omitempty"`

	// Group is the display group the SDK put the action in (for the UI).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Group string `json:"group,omitempty"`
}

// PhaseTransition is one entry of status.phaseHistory.
type PhaseTransition struct {
	// Phase is the action phase reached, by its API name (QUEUED, RUNNING,
	// SUCCEEDED...).
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Phase string `json:"phase"`

	// OccurredAt is when the executor observed the transition.
	// +kubebuilder:validation:Required
	OccurredAt metav1.Time `json:"occurredAt"`

	// Message says why, when there is something to say (a retry's cause, a
	// failure).
	// +optional
	Message string `json:"message,omitempty"`
}

// ErrorKind says who caused a failure: the user's code or the platform.
// +kubebuilder:validation:Enum=USER;SYSTEM
type ErrorKind string

const (
	// ErrorKindUser: the task failed (its code raised, its process crashed).
	ErrorKindUser ErrorKind = "USER"
	// ErrorKindSystem: the platform failed (the Pod could not be created, the
	// node went away).
	ErrorKindSystem ErrorKind = "SYSTEM"
)

// ErrorState is the last failure of the action.
type ErrorState struct {
	// Code is a short machine-readable name (MaxRetriesExceeded,
	// ConditionTimedOut, an error code from the task's error document...).
	// +optional
	Code string `json:"code,omitempty"`

	// Kind is USER or SYSTEM; empty when unknown.
	// +optional
	Kind ErrorKind `json:"kind,omitempty"`

	// Message is the human-readable description.
	// +optional
	Message string `json:"message,omitempty"`
}

// TaskActionStatus is the executor's view of the action. Only the reconciler
// writes it, through the status subresource.
type TaskActionStatus struct {
	// StateJSON is the last state reported for the action, as a JSON object
	// with phase, actionId and timestamp.
	// +optional
	StateJSON string `json:"stateJson,omitempty"`

	// PluginState is the opaque state the plugin keeps between reconciles of
	// the current attempt (for the pod plugin: which Pod it created). It is
	// cleared when a new attempt starts.
	// +optional
	PluginState []byte `json:"pluginState,omitempty"`

	// PluginStateVersion is the format version of PluginState, so a plugin can
	// read state written by an older release.
	// +optional
	PluginStateVersion uint8 `json:"pluginStateVersion,omitempty"`

	// PluginPhase is the plugin's own phase of the current attempt
	// (NotReady, Queued, Running, Success...).
	// +optional
	PluginPhase string `json:"pluginPhase,omitempty"`

	// PluginPhaseVersion increases when the plugin reports news within the
	// same phase (new logs, a changed reason).
	// +optional
	PluginPhaseVersion uint32 `json:"pluginPhaseVersion,omitempty"`

	// Attempts is the 1-based number of the current attempt; 0 means the
	// first attempt has not been counted yet (read it with AttemptNumber).
	// +optional
	Attempts uint32 `json:"attempts,omitempty"`

	// SystemFailures counts consecutive platform failures of the current
	// attempt; past the configured maximum the action fails.
	// +optional
	SystemFailures uint32 `json:"systemFailures,omitempty"`

	// CacheStatus is a flyteidl2.core.CatalogCacheStatus value (0 = cache
	// disabled, 1 = miss, 2 = hit, 3 = populated...).
	// +optional
	CacheStatus int32 `json:"cacheStatus,omitempty"`

	// Conditions are Progressing, Succeeded and Failed (see the Condition*
	// and Reason* constants). A TaskAction is terminal once Succeeded or
	// Failed is True.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// PhaseHistory is append-only: one entry per phase change, never two
	// equal entries in a row.
	// +optional
	PhaseHistory []PhaseTransition `json:"phaseHistory,omitempty"`

	// ErrorState is the last failure, kept after a retry so the history of
	// the action can say why it was retried.
	// +optional
	ErrorState *ErrorState `json:"errorState,omitempty"`

	// SignalValue is the serialized flyteidl2.core.Literal that completed a
	// condition action.
	// +optional
	SignalValue []byte `json:"signalValue,omitempty"`

	// SignalledBy names the principal that sent the signal.
	// +optional
	SignalledBy string `json:"signalledBy,omitempty"`

	// SignalledAt is when the signal arrived.
	// +optional
	SignalledAt *metav1.Time `json:"signalledAt,omitempty"`
}

// TaskAction is one action of a run, executed on Kubernetes. It is named
// <runName>-<actionName> (see ObjectName). A child action is owned by its
// parent's TaskAction, so deleting the root of a run deletes the whole tree;
// deleting a TaskAction aborts its action.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Run",type=string,JSONPath=`.spec.runName`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.actionName`
// +kubebuilder:printcolumn:name="TaskType",type=string,JSONPath=`.spec.taskType`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=='Progressing')].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Progressing",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=='Progressing')].status`
// +kubebuilder:printcolumn:name="Succeeded",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=='Succeeded')].status`
// +kubebuilder:printcolumn:name="Failed",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=='Failed')].status`
type TaskAction struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:Required
	Spec TaskActionSpec `json:"spec"`

	// +optional
	Status TaskActionStatus `json:"status,omitempty"`
}

// TaskActionList is a list of TaskActions.
//
// +kubebuilder:object:root=true
type TaskActionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TaskAction `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TaskAction{}, &TaskActionList{})
}
