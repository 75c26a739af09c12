package process

import (
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// leftoverKillTimeout bounds the wait for an attempt's leftovers to die
// after SIGKILL (they die at once unless stuck in the kernel).
const leftoverKillTimeout = 10 * time.Second

// setUpCgroup gives the attempt its cgroup, or says in its log why it runs
// without one and which declared limits are therefore not enforced.
func (p *Process) setUpCgroup(h *cgroupHost, spec Spec) {
	if h.ok() {
		cg, err := h.newCgroup(cgroupName(filepath.Clean(spec.Dir)), spec.Limits)
		if err == nil {
			p.cg = cg
		} else {
			p.log.system("running without a cgroup: %v", err)
		}
	}
	lim := spec.Limits
	if !lim.any() {
		return
	}
	var not Limits
	switch {
	case p.cg == nil:
		not = lim
	default:
		if !h.memory {
			not.MemoryBytes = lim.MemoryBytes
		}
		if !h.cpu {
			not.CPUMillis = lim.CPUMillis
		}
	}
	if not.any() {
		p.unenforced = fmt.Sprintf("the task's resource limits (%s) are not enforced: %s", not, h.Describe())
		p.log.system("%s", p.unenforced)
	} else {
		p.log.system("resource limits: %s", lim)
	}
}

// Unenforced says why the limits the task declared are not enforced, ""
// when they are (or it declared none).
func (p *Process) Unenforced() string { return p.unenforced }

// killLeftovers kills whatever the attempt started that still runs once
// its leader exited: everything in its cgroup, and (with or without one)
// its process group, the tree recorded when it was stopped, and every
// process working in its directory with that process's own descendants.
// Detached processes were re-parented to the manager (a subreaper), so
// their /proc parent links lead nowhere near the leader any more: the
// directory is what still ties them to the attempt without a cgroup.
//
// An attempt of another user (a leased uid) in a cgroup cannot leave it:
// moving a process to another cgroup takes write access to that cgroup's
// procs file, which only the manager's user has. Once the cgroup is empty
// nothing it started runs anywhere, and the scans of every process on
// the host (its group, its directory) would find nothing of it: they are
// skipped, and the attempt is contained.
func (p *Process) killLeftovers(tree []Identity) {
	n := 0
	if p.cg != nil {
		k, err := p.cg.kill(leftoverKillTimeout)
		if err != nil {
			p.log.system("%v", err)
		}
		n += k
		if err == nil && p.user.Other() {
			p.contained = true
			p.signalAll(tree, syscall.SIGKILL)
			if n > 0 {
				p.log.system("killed %d process(es) the attempt left running", n)
			}
			return
		}
	}
	if p.id.leader() != leaderRecycled {
		n += len(groupMembers(p.id.PGID))
	}
	p.signalAll(tree, syscall.SIGKILL)
	k, err := killInDir(p.dir)
	if err != nil {
		p.log.system("%v", err)
	}
	n += k
	if n > 0 {
		p.log.system("killed %d process(es) the attempt left running", n)
	}
}

// noteOOM records that the kernel's OOM killer ended the attempt: a
// process of its cgroup was OOM-killed and the attempt did not succeed. A
// task that survives the loss of a child and exits 0 succeeded.
func (p *Process) noteOOM() {
	if p.cg == nil || p.limits.MemoryBytes <= 0 || p.status.Aborted || p.status.TimedOut {
		return
	}
	if p.status.Code == 0 && p.status.Signal == "" && p.status.Err == nil {
		return
	}
	if p.cg.oomKills() > 0 {
		p.status.OOMKilled = true
		p.status.MemoryLimit = p.limits.MemoryBytes
	}
}

// releaseCgroup removes the attempt's cgroup (empty by now).
func (p *Process) releaseCgroup() {
	if p.cg == nil {
		return
	}
	if err := p.cg.remove(); err != nil {
		p.log.system("%v", err)
	}
	p.cg = nil
}

// KillCgroup kills whatever still runs in the cgroup of the attempt whose
// working directory is dir, and removes it: for an attempt a previous
// manager started (its cgroup survives the manager). It reports how many
// processes it killed.
func (r *Runner) KillCgroup(dir string) (int, error) {
	if !r.cg.ok() {
		return 0, nil
	}
	cg := r.cg.cgroupOf(cgroupName(filepath.Clean(dir)))
	n, err := cg.kill(leftoverKillTimeout)
	if err != nil {
		return n, err
	}
	return n, cg.remove()
}

// ContainerCgroup is the cgroupsPath that places an OCI runtime's
// container, started as the process of the attempt working in dir, in a
// cgroup called name below the attempt's own, so its limits apply to the
// container and its end is the attempt's (runc reads a relative path from
// where its own process is: in the attempt's cgroup on v1, at its parent on
// v2). "" when attempts get no cgroup on this host.
func (r *Runner) ContainerCgroup(dir, name string) string {
	switch {
	case r.cg.v2 != "":
		return cgroupName(filepath.Clean(dir)) + "/" + name
	case len(r.cg.v1) > 0:
		return name
	}
	return ""
}
