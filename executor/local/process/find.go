package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
