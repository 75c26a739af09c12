package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"fmgr.dev/executor/local/process"
)

// How long start waits for the cluster to be ready, and stop for it to end:
// generous, the machine may be loaded.
const (
	readyTimeout = 8 * time.Minute
	stopTimeout  = 3 * time.Minute
)

// start runs `run` in a session of its own, in the background, and returns
// once the cluster is ready. A cluster already running in the directory is
// left as it is.
func start(args []string) error {
	o, err := parse("start", args)
	if err != nil {
		return err
	}
	if _, err := runningPID(o); err == nil {
		if _, err := os.Stat(o.path(readyFile)); err == nil {
			fmt.Print("A test cluster is running already.\n" + hint(o))
			return nil
		}
		return fmt.Errorf("a test cluster is starting or stuck in %s: run `make test-cluster-stop` first", o.dir)
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(o.path(readyFile))
	sayTaskRuntime(context.Background(), o)
	logf, err := os.Create(o.path(logFile))
	if err != nil {
		return err
	}
	defer logf.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append(append([]string{"run"}, args...), "--dir", o.dir)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(readyTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("the test cluster did not start (%v); its log %s ends:\n%s", err, o.path(logFile), tail(o.path(logFile)))
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("the test cluster was not ready after %s; see %s", readyTimeout, o.dir)
		case <-tick.C:
			if _, err := os.Stat(o.path(readyFile)); err == nil {
				fmt.Print(hint(o))
				return nil
			}
		}
	}
}

// stop ends the cluster of the directory, kills whatever it left running
// (Pod processes, etcd, the API server) and removes the directory. Stopping
// a cluster that does not run only cleans up.
func stop(args []string) error {
	o, err := parse("stop", args)
	if err != nil {
		return err
	}
	pid, err := runningPID(o)
	switch {
	case err == nil:
		_ = syscall.Kill(pid, syscall.SIGTERM)
		if !waitGone(pid, stopTimeout) {
			fmt.Fprintf(os.Stderr, "the test cluster (pid %d) did not stop within %s: killing it\n", pid, stopTimeout)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, stopTimeout)
		}
		fmt.Println("test cluster stopped")
	case errors.Is(err, errNotRunning):
		fmt.Println("no test cluster is running in " + o.dir)
	default:
		return err
	}
	// What a cluster killed without its own cleanup leaves: Pod processes
	// (they work below pods/) and etcd and the API server, whose flags
	// name their directories in o.dir.
	process.KillInDir(o.path("pods"))
	killNaming(o.dir + string(filepath.Separator))
	if err := os.RemoveAll(o.dir); err != nil {
		return fmt.Errorf("removing %s: %w", o.dir, err)
	}
	return nil
}

// runningPID is the pid of the cluster process of the directory; it must
// still be that process (its command line names the directory).
func runningPID(o options) (int, error) {
	b, err := os.ReadFile(o.path(pidFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, errNotRunning
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, errNotRunning
	}
	args, err := cmdline(pid)
	if err != nil || !contains(args, o.dir) {
		return 0, errNotRunning
	}
	return pid, nil
}

func cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// killNaming kills (SIGKILL) the processes with an argument naming a path
// below dir: etcd (--data-dir) and kube-apiserver (--cert-dir) of a cluster
// that died without stopping them.
func killNaming(dir string) {
	var killed []int
	// Wait for them: SIGKILL is delivered at once but a busy machine may
	// take a moment to end a process, and stop promises they are gone.
	defer func() {
		for _, pid := range killed {
			waitGone(pid, stopTimeout)
		}
	}()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		args, err := cmdline(pid)
		if err != nil {
			continue
		}
		for _, a := range args {
			if strings.HasPrefix(a, "--data-dir="+dir) || strings.HasPrefix(a, "--cert-dir="+dir) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed = append(killed, pid)
				}
				break
			}
		}
	}
}

// waitGone waits up to d for pid to exit.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !gone(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// gone says pid has exited (a zombie whose parent has not reaped it yet has).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := bytes.Cut(st, []byte(") "))
	return bytes.HasPrefix(rest, []byte("Z"))
}

// tail is the end of a log file.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
