package local

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// The OCI runtime configuration (config.json of a bundle) of a raw
// container attempt: only the fields this executor sets, named as the
// runtime spec (v1.0.2) names them.

type ociSpec struct {
	Version  string     `json:"ociVersion"`
	Process  ociProcess `json:"process"`
	Root     ociRoot    `json:"root"`
	Hostname string     `json:"hostname"`
	Mounts   []ociMount `json:"mounts"`
	Linux    ociLinux   `json:"linux"`
}

type ociProcess struct {
	Terminal        bool            `json:"terminal"`
	User            ociUser         `json:"user"`
	Args            []string        `json:"args"`
	Env             []string        `json:"env"`
	Cwd             string          `json:"cwd"`
	Capabilities    ociCapabilities `json:"capabilities"`
	NoNewPrivileges bool            `json:"noNewPrivileges"`
}

type ociUser struct {
	UID            uint32   `json:"uid"`
	GID            uint32   `json:"gid"`
	AdditionalGids []uint32 `json:"additionalGids,omitempty"`
}

// ociCapabilities: every set empty (not omitted: an empty set is none).
type ociCapabilities struct {
	Bounding    []string `json:"bounding"`
	Effective   []string `json:"effective"`
	Inheritable []string `json:"inheritable"`
	Permitted   []string `json:"permitted"`
	Ambient     []string `json:"ambient"`
}

type ociRoot struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type ociLinux struct {
	Namespaces    []ociNamespace `json:"namespaces"`
	CgroupsPath   string         `json:"cgroupsPath,omitempty"`
	Resources     ociResources   `json:"resources"`
	MaskedPaths   []string       `json:"maskedPaths"`
	ReadonlyPaths []string       `json:"readonlyPaths"`
}

type ociNamespace struct {
	Type string `json:"type"`
}

type ociResources struct {
	Devices []ociDevice `json:"devices"`
}

type ociDevice struct {
	Allow  bool   `json:"allow"`
	Access string `json:"access"`
}

// containerSpec is the configuration of a container running args as
// uid:gid in the bundle's rootfs, with binds (destination → source on the
// host) and its cgroup at cgroupsPath: no capabilities, no new privileges,
// fresh pid, mount, network (loopback only), IPC and UTS namespaces, and
// runc's default masked and read-only paths and devices.
func containerSpec(args, env []string, cwd string, uid, gid uint32, binds [][2]string, cgroupsPath string) ociSpec {
	none := []string{}
	s := ociSpec{
		Version: "1.0.2",
		Process: ociProcess{
			User: ociUser{UID: uid, GID: gid, AdditionalGids: []uint32{gid}},
			Args: args, Env: env, Cwd: cwd,
			Capabilities:    ociCapabilities{Bounding: none, Effective: none, Inheritable: none, Permitted: none, Ambient: none},
			NoNewPrivileges: true,
		},
		Root:     ociRoot{Path: "rootfs"},
		Hostname: "task",
		Mounts: []ociMount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: ociLinux{
			Namespaces:  []ociNamespace{{Type: "pid"}, {Type: "network"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}},
			CgroupsPath: cgroupsPath,
			Resources:   ociResources{Devices: []ociDevice{{Allow: false, Access: "rwm"}}},
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	for _, b := range binds {
		s.Mounts = append(s.Mounts, ociMount{Destination: b[0], Type: "bind", Source: b[1],
			Options: []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	return s
}

// writeBundle writes spec as bundle/config.json.
func writeBundle(bundle string, spec ociSpec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600)
}
