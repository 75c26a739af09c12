package apps

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/executor/local/secretfiles"
)

// replica is one process of an app.
type replica struct {
	name     string
	revision uint64
	net      *replicaNet // how the manager reaches it (network.go)
	root     string      // its directory: work/ and replica.log
	logPath  string
	proc     *process.Process
	user     runas.User
	released bool
	started  time.Time
	ready    bool
	readyAt  time.Time
	stopping bool
	inflight int
}

// rawPrefixTemplate is the template the SDK puts in fserve's arguments for
// the app's raw data location.
const rawPrefixTemplate = "{{.rawOutputDataPrefix}}"

// startReplica starts one more replica of a's target (r.mu held; let go
// while its secrets are looked up, see replicaSecrets).
func (r *Runtime) startReplica(a *appState) error {
	t := a.target
	c := t.Spec.GetContainer()
	if c == nil {
		return errors.New("the local executor runs apps with a container spec only; a pod spec needs the kubernetes executor")
	}
	endpoint := r.cfg.Endpoint()
	if endpoint == "" {
		return errors.New("the manager is not listening yet")
	}
	argv := append(append([]string(nil), c.GetCommand()...), c.GetArgs()...)
	if len(argv) == 0 {
		return errors.New("the app's container has neither a command nor args")
	}
	raw := strings.TrimSuffix(r.cfg.RawDataPrefix, "/") + "/" + a.key.Project + "/" + a.key.Domain + "/" + a.key.Name
	for i, arg := range argv {
		argv[i] = strings.ReplaceAll(arg, rawPrefixTemplate, raw)
	}
	useNS, err := r.useNamespaces()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s-r%d-%d", a.key.Name, t.Revision, a.serial)
	a.serial++
	root := filepath.Join(r.appDir(a.key), name)
	_ = os.RemoveAll(root) // a leftover of an earlier manager's
	if err := r.makeDir(root); err != nil {
		return err
	}
	limits, err := process.LimitsOf(c.GetResources())
	if err != nil {
		return err
	}
	var rn *replicaNet
	if useNS {
		rn, err = nsNet(root, appPort(t.Spec), reachable(endpoint, r.cfg.Env))
		endpoint = insideEndpoint(endpoint)
	} else {
		rn, err = hostNet()
	}
	if err != nil {
		return err
	}
	env, err := contract.BuildAppEnv(contract.AppEnvSpec{Host: r.cfg.Host, PassThrough: r.cfg.PassThrough, Defaults: r.cfg.Env,
		AppEnv: c.GetEnv(), Org: a.key.Org, Project: a.key.Project, Domain: a.key.Domain, Endpoint: endpoint, Port: rn.port,
		TLS: r.cfg.TLS, Auth: r.cfg.Auth})
	if err != nil {
		rn.close()
		return err
	}
	secrets, err := r.replicaSecrets(a, raw)
	if err != nil {
		rn.close()
		return err
	}
	user, err := r.cfg.Users.Lease(fmt.Sprintf("app %s replica %s", a.key, name))
	if err != nil {
		rn.close()
		return fmt.Errorf("no user to run the replica as: %w", err)
	}
	if env, err = secretfiles.Deliver(root, env, secrets, user); err != nil {
		secretfiles.Remove(root)
		rn.close()
		r.cfg.Users.Release(user)
		return err
	}
	rep := &replica{name: name, revision: t.Revision, net: rn, root: root, logPath: filepath.Join(root, "replica.log"),
		user: user, started: time.Now()}
	proc, err := r.cfg.Runner().Start(process.Spec{Args: argv, Env: env.Environ(), Dir: filepath.Join(root, "work"),
		LogPath: rep.logPath, Limits: limits, Plain: true, User: user, NetNS: rn.ns})
	if err != nil {
		secretfiles.Remove(root)
		rn.close()
		r.cfg.Users.Release(user)
		return err
	}
	rep.proc = proc
	a.replicas = append(a.replicas, rep)
	r.cfg.Log.Info("started an app replica", "app", a.key.String(), "replica", name, "revision", t.Revision, "port", rn.port,
		"ownNetwork", rn.ns != nil, "runAs", user.String())
	return nil
}

// stopReplicaLocked stops rep (r.mu held); the loop collects it once its
// process ended.
func (r *Runtime) stopReplicaLocked(a *appState, rep *replica, why string) {
	if rep.stopping {
		return
	}
	rep.stopping, rep.ready = true, false
	go r.stopReplica(rep, why)
}

func (r *Runtime) stopReplica(rep *replica, why string) {
	rep.proc.Abort(why)
}

// release gives the replica's user back once its process ended.
func (r *Runtime) release(rep *replica) {
	if rep.released {
		return
	}
	rep.released = true
	<-rep.proc.Done()
	rep.net.close()
	secretfiles.Remove(rep.root) // before HandBack makes what is left the group's to read
	if rep.user.Other() {
		_ = process.HandBack(rep.root, rep.user, r.cfg.Users.Group())
	}
	r.cfg.Users.Release(rep.user)
}

// probe reports whether the replica accepts connections on its port.
func (rep *replica) probe() bool { return rep.net.probe() }

// addr is the replica's address as the proxy names it (its transport
// dials the replica whatever the address).
func (rep *replica) addr() string { return rep.net.addr() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// exitSummary says how a replica ended, with its last lines.
func exitSummary(st process.ExitStatus) string {
	how := fmt.Sprintf("exited with code %d", st.Code)
	if st.Signal != "" {
		how = "was killed (" + st.Signal + ")"
	}
	if st.OOMKilled {
		how = "ran out of memory"
	}
	lines := append(append([]string(nil), st.StdoutTail...), st.StderrTail...)
	if len(st.StderrTail) > 0 {
		lines = st.StderrTail // a crash tells why on stderr
	}
	if n := len(lines); n > 10 {
		lines = lines[n-10:]
	}
	if len(lines) == 0 {
		return how
	}
	return how + "; last lines:\n" + strings.Join(lines, "\n")
}

func crashLoopMessage(crashes int, last string) string {
	return fmt.Sprintf("crash loop: replicas ended %d times in a row without serving; the last %s", crashes, last)
}

// lastLine is the first line of a summary (how it ended).
func lastLine(s string) string {
	first, _, _ := strings.Cut(s, ";")
	return first
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// makeDir makes dir and the directories between the runtime's and it the
// replicas' group's to enter (mode 2750, as the executor's work directory
// is), also when an earlier manager made them otherwise.
func (r *Runtime) makeDir(dir string) error {
	rel, err := filepath.Rel(r.cfg.Dir, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not under %s", dir, r.cfg.Dir)
	}
	path := r.cfg.Dir
	for _, part := range append([]string{"."}, strings.Split(rel, string(filepath.Separator))...) {
		path = filepath.Join(path, part)
		if err := os.MkdirAll(path, 0o750); err != nil {
			return err
		}
		if !r.cfg.Users.Separate() {
			continue
		}
		if err := os.Chown(path, -1, int(r.cfg.Users.Group())); err != nil {
			return err
		}
		if err := os.Chmod(path, os.ModeSetgid|0o750); err != nil {
			return err
		}
	}
	return nil
}
