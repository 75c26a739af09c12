package nodeagent

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Where the host gives the process runner no cgroup with a memory
// controller, the agent enforces a container's memory limit itself, best
// effort: it samples the resident memory (RSS) of the container's process
// group and kills the group when the sum goes over the limit. Memory
// allocated faster than the sampling period can overshoot before the kill,
// and processes that left the group are not counted.

// memorySamplePeriod is how often the RSS of a limited container is sampled.
const memorySamplePeriod = 100 * time.Millisecond

// memoryWatch kills process group pgid once its RSS exceeds limit.
type memoryWatch struct {
	exceeded atomic.Bool
}

func (w *memoryWatch) run(pgid int, limit int64, done <-chan struct{}) {
	tick := time.NewTicker(memorySamplePeriod)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if groupRSS(pgid) > limit {
				w.exceeded.Store(true)
				// As the kernel's OOM killer does: no grace.
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				return
			}
		}
	}
}

// groupRSS sums the resident memory of the live members of process group
// pgid, in bytes.
func groupRSS(pgid int) int64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	page := int64(os.Getpagesize())
	var sum int64
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the command's closing parenthesis: state, ppid, pgrp, ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 3 {
			continue
		}
		if g, _ := strconv.Atoi(string(fields[2])); g != pgid {
			continue
		}
		statm, err := os.ReadFile("/proc/" + e.Name() + "/statm")
		if err != nil {
			continue
		}
		if f := bytes.Fields(statm); len(f) >= 2 {
			pages, _ := strconv.ParseInt(string(f[1]), 10, 64)
			sum += pages * page
		}
	}
	return sum
}
