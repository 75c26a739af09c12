package kube

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/errs"
)

// TailLogs sends what the app's Pods (one Pod when replica names it)
// printed, from their container logs through the API server as for
// attempts (logs.go), following them while ctx lasts. The Pods are the
// ones there when it is called: a Pod started later is not followed.
func (r *Apps) TailLogs(ctx context.Context, k appruntime.Key, replica string, emit func(string, []*dataplane.LogLine) error) error {
	if r.cfg.Clientset == nil {
		return fmt.Errorf("app %s: this manager reads no Pod logs: %w", k, errs.ErrUnavailable)
	}
	pods, err := r.pods(ctx, k, 0)
	if err != nil {
		return fmt.Errorf("app %s: listing its Pods: %v: %w", k, apierrors.ReasonForError(err), errs.ErrUnavailable)
	}
	var names []string
	for _, p := range pods {
		if replica == "" || p.Name == replica {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		if replica != "" {
			return errs.NotFoundf("app %s has no replica %q", k, replica)
		}
		return errs.NotFoundf("app %s has no replica logs yet", k)
	}
	ns := r.cfg.Placement.NamespaceOf(k.Project, k.Domain)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex // one emit at a time
	var wg sync.WaitGroup
	errc := make(chan error, len(names))
	for _, pod := range names {
		wg.Go(func() {
			err := r.followPod(ctx, ns, pod, func(lines []*dataplane.LogLine) error {
				mu.Lock()
				defer mu.Unlock()
				return emit(pod, lines)
			})
			if err != nil && ctx.Err() == nil {
				errc <- err
				cancel()
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// followPod streams one Pod's app container log; a Pod that is gone or
// has not started yet has nothing to send.
func (r *Apps) followPod(ctx context.Context, ns, pod string, emit func([]*dataplane.LogLine) error) error {
	req := r.cfg.Clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: appContainerName, Follow: true, Timestamps: true})
	stream, err := req.Stream(ctx)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsBadRequest(err):
		return nil
	case err != nil:
		return fmt.Errorf("logs of %s are not available from the cluster: %v: %w", pod, apierrors.ReasonForError(err), errs.ErrUnavailable)
	}
	defer stream.Close()
	br := bufio.NewReaderSize(stream, 64*1024)
	var batch []*dataplane.LogLine
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			batch = append(batch, logLine(strings.TrimSuffix(line, "\n"), pod))
		}
		// Lines go out as they come: a batch is what is buffered already.
		if len(batch) > 0 && (len(batch) >= logBatch || br.Buffered() == 0 || err != nil) {
			if eerr := emit(batch); eerr != nil {
				return eerr
			}
			batch = nil
		}
		if err == io.EOF || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
