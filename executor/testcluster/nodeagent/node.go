package nodeagent

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// registerNode creates the agent's Node (or takes over one left by an
// earlier agent) and reports it Ready with this host's CPUs and memory, and
// where its kubelet API listens.
// Nothing watches node heartbeats in the test cluster (no controller
// manager), so one Ready report lasts.
func registerNode(ctx context.Context, client kubernetes.Interface, name string, kubeletPort int) error {
	nodes := client.CoreV1().Nodes()
	node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": runtime.GOARCH},
	}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = nodes.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("nodeagent: registering node %s: %w", name, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(hostMemory(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(1000, resource.DecimalSI),
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "the test node agent runs Pods as local processes", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: hostIP}, {Type: corev1.NodeHostName, Address: name}},
		// Where the API server reaches the agent's kubelet API (kubelet.go).
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(kubeletPort)}},
		NodeInfo:        corev1.NodeSystemInfo{OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH, KubeletVersion: "fmgr-nodeagent"},
	}
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("nodeagent: reporting node %s ready: %w", name, err)
	}
	return nil
}

// hostMemory is MemTotal of /proc/meminfo in bytes (0 when unreadable).
func hostMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
