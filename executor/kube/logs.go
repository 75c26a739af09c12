package kube

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

const (
	logBatch     = 100
	maxLineBytes = 1 << 20
)

// Logs serves the log of one attempt of key (TailLogs) from its Pod's
// container log, through the API server; attempt 0 means the current one.
// With follow, the log is streamed until the container ends.
func (d *Driver) Logs(ctx context.Context, key store.ActionKey, attempt int32, follow bool, emit func([]*dataplane.LogLine) error) error {
	if d.clientset == nil {
		return fmt.Errorf("the kubernetes executor has not started: %w", errs.ErrUnavailable)
	}
	if attempt <= 0 {
		a, err := d.state.Get(ctx, key)
		if err != nil {
			return err
		}
		attempt = a.Attempts
	}
	name := d.nameOf(key)
	pod := podNameFor(name.Name, attempt)
	req := d.clientset.CoreV1().Pods(name.Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: containerName, Follow: follow, Timestamps: true})
	stream, err := req.Stream(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return errs.NotFoundf("logs of attempt %d of action %s (its Pod does not exist (yet))", attempt, key.Name)
	case err != nil:
		return fmt.Errorf("logs of attempt %d of action %s are not available from the cluster: %v: %w", attempt, key.Name, apierrors.ReasonForError(err), errs.ErrUnavailable)
	}
	defer stream.Close()
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	var batch []*dataplane.LogLine
	for sc.Scan() {
		batch = append(batch, logLine(sc.Text(), pod))
		if len(batch) >= logBatch {
			if err := emit(batch); err != nil {
				return err
			}
			batch = nil
		}
	}
	if len(batch) > 0 {
		if err := emit(batch); err != nil {
			return err
		}
	}
	return sc.Err()
}

// logLine parses one line of a timestamped container log. Its message ends
// in a newline, as the local executor's do: the SDK's CLI prints messages
// back to back.
func logLine(s, pod string) *dataplane.LogLine {
	l := &dataplane.LogLine{Message: s + "\n", Originator: dataplane.LogLineOriginator_USER, ShortPodName: pod}
	if ts, msg, ok := strings.Cut(s, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			l.Timestamp, l.Message = timestamppb.New(t), msg+"\n"
		}
	}
	return l
}

// LogContext says where attempt n of key logs (GetActionLogContext): its
// Pod and the task's container there.
func (d *Driver) LogContext(key store.ActionKey, n int32) (*core.LogContext, error) {
	name := d.nameOf(key)
	pod := podNameFor(name.Name, n)
	return &core.LogContext{
		PrimaryPodName: pod,
		Pods: []*core.PodLogContext{{
			Namespace:            name.Namespace,
			PodName:              pod,
			PrimaryContainerName: containerName,
			Containers:           []*core.ContainerContext{{ContainerName: containerName}},
		}},
	}, nil
}
