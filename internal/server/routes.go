package server

import "slices"

// Services lists the full names of the mounted Connect services
// ("flyteidl2.workflow.RunService"), sorted: what the server routes, for
// the start log and the tests that probe every served procedure.
func (s *Server) Services() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.mounted))
	for path := range s.mounted {
		names = append(names, path[1:len(path)-1]) // "/pkg.Service/" → "pkg.Service"
	}
	slices.Sort(names)
	return names
}
