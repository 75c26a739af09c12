package v1

// Placement says where the TaskAction of an action lives: its namespace and
// its name, derived from the action's key alone. The kubernetes executor
// names the objects it creates with it, and the manager's Kubernetes-style
// API names the objects it serves from the database with it, so `kubectl
// get taskactions` shows one action under the same name either way.
//
// +kubebuilder:object:generate=false
type Placement struct {
	// Namespace holds every TaskAction unless NamespacePerProject.
	Namespace string
	// NamespacePerProject puts each project and domain in a namespace of
	// its own (NamespaceName).
	NamespacePerProject bool
}

// ActionRef names an action: the run's org, project, domain and name, and
// the action's name within the run.
//
// +kubebuilder:object:generate=false
type ActionRef struct {
	Org, Project, Domain, Run, Action string
}

// AnnotationOrg keeps an action's org on its TaskAction (it is not a spec
// field, and the object name carries it only in a hashed form).
const AnnotationOrg = "flyte.org/org"

// NamespaceOf is the namespace of the actions of project and domain.
func (p Placement) NamespaceOf(project, domain string) string {
	if p.NamespacePerProject {
		return NamespaceName(project, domain)
	}
	return p.Namespace
}

// NameOf is the TaskAction name of ref. Run names are unique per project
// and domain only, so in a namespace shared by every project the name
// carries them too; a non-empty org is prefixed.
func (p Placement) NameOf(ref ActionRef) string {
	run := ref.Run
	if !p.NamespacePerProject {
		run = ref.Project + "-" + ref.Domain + "-" + run
	}
	if ref.Org != "" {
		run = ref.Org + "-" + run
	}
	return ObjectName(run, ref.Action)
}
