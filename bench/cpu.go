package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is CPU time (user + system) of a manager and of the processes
// it started: the attempts' processes (reaped by the manager or by the
// warm server) and the warm server itself.
type cpuTimes struct {
	manager time.Duration // the manager process's own
	tasks   time.Duration // its children's, waited for or alive
}

func (c cpuTimes) minus(before cpuTimes) cpuTimes {
	return cpuTimes{manager: c.manager - before.manager, tasks: c.tasks - before.tasks}
}

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procTimes are fields 14–17 of /proc/<pid>/stat: utime, stime (the
// process's own) and cutime, cstime (its waited-for children's, and
// theirs recursively); and field 4, the parent's pid.
type procTimes struct {
	ppid        int
	self, child time.Duration
}

// parseStat reads a /proc/<pid>/stat line; its second field (the command)
// is in parentheses and may hold spaces.
func parseStat(line string) (procTimes, bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procTimes{}, false
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3
	if len(f) < 15 {
		return procTimes{}, false
	}
	n := func(field int) int64 {
		v, _ := strconv.ParseInt(f[field-3], 10, 64)
		return v
	}
	return procTimes{
		ppid:  int(n(4)),
		self:  time.Duration(n(14)+n(15)) * clockTick,
		child: time.Duration(n(16)+n(17)) * clockTick,
	}, true
}

func readStat(path string) (procTimes, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procTimes{}, false
	}
	return parseStat(string(b))
}

// readCPU reads the CPU times of process pid and its children: the
// children it waited for (cutime, cstime) and those alive now (their own
// times and their waited-for children's). A child that ended but is not
// reaped yet is missed: read after the runs settled.
func readCPU(pid int) cpuTimes {
	own, ok := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	if !ok {
		return cpuTimes{}
	}
	c := cpuTimes{manager: own.self, tasks: own.child}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if t, ok := readStat("/proc/" + e.Name() + "/stat"); ok && t.ppid == pid {
			c.tasks += t.self + t.child
		}
	}
	return c
}

// serverCPU is the CPU time of a server process pid and its children,
// alive or waited for (PostgreSQL's backends, ended or not); 0 for pid 0.
func serverCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	c := readCPU(pid)
	return c.manager + c.tasks
}

// selfCPU is the bench process's own CPU time: the client's share.
func selfCPU() time.Duration {
	t, _ := readStat("/proc/self/stat")
	return t.self
}
