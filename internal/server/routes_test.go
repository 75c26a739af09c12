package server

import (
	"net/http"
	"slices"
	"testing"

	"fmgr.dev/internal/config"
)

func TestServicesListsWhatIsMounted(t *testing.T) {
	s := New(config.Default().Server, nil)
	if got := s.Services(); len(got) != 0 {
		t.Fatalf("Services before Mount = %v, want none", got)
	}
	h := http.NotFoundHandler()
	if err := s.Mount(Service{Path: "/flyteidl2.workflow.RunService/", Handler: h}, Service{Path: "/flyteidl2.actions.ActionsService/", Handler: h}); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Services(), []string{"flyteidl2.actions.ActionsService", "flyteidl2.workflow.RunService"}; !slices.Equal(got, want) {
		t.Errorf("Services = %v, want %v", got, want)
	}
}
