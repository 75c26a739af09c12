package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FindInDir lists the live processes whose working directory is dir or lies
// below it, each with its identity (PGID is the process's own group). A
// restarted manager uses it to find what an attempt left running when its
// identity was never recorded (the manager died between starting the
// process and writing it down) or when a descendant left the group.
// Processes whose cwd cannot be read (other users') are not seen.
func FindInDir(dir string) []Identity {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) || dir == "/" {
		return nil
	}
	self := os.Getpid()
	var out []Identity
	forEachProc(func(pid int, st procStat) {
		if pid == self || st.zombie() {
			return
		}
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		if err != nil {
			return
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator)) {
			out = append(out, Identity{PID: pid, PGID: st.pgrp, StartTicks: st.startTicks, BootID: bootID})
		}
	})
	return out
}

// KillInDir kills (SIGKILL) every process working in dir or below it, and
// each one's descendants wherever they work, until none is left or
// leftoverKillTimeout passed. For the end of an attempt, whose processes
// get no grace: the attempt is over.
func KillInDir(dir string) {
	_, _ = killInDir(dir)
}

// killInDir is KillInDir reporting how many processes it killed, and an
// error naming what survived.
func killInDir(dir string) (int, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // /proc shows resolved paths
	}
	killed := map[int]bool{}
	deadline := time.Now().Add(leftoverKillTimeout)
	for {
		var found []Identity
		for _, id := range FindInDir(dir) {
			found = append(found, id)
			found = append(found, descendants(id.PID)...)
		}
		if len(found) == 0 {
			return len(killed), nil
		}
		for _, id := range found {
			killed[id.PID] = true
			signalIfSame(id, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return len(killed), fmt.Errorf("%d process(es) in %s survived SIGKILL", len(found), dir)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
