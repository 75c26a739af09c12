package runstate

import (
	"context"
	"fmt"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/failpoint"
	"fmgr.dev/internal/store"
)

// Abort marks key and every unfinished descendant for abort and tells the
// executor, which stops what runs and records ABORTED. Aborting something
// that already ended is a no-op.
func (s *Service) Abort(ctx context.Context, key store.ActionKey, reason, by string) error {
	if reason == "" {
		reason = "aborted by user"
	}
	info, err := marshal(&workflow.AbortInfo{Reason: reason, AbortedBy: userIdentity(by)})
	if err != nil {
		return err
	}
	marked, err := s.store.Actions.RequestAbort(ctx, key, info)
	if err != nil {
		return fmt.Errorf("abort %s: %w", key, err)
	}
	if len(marked) == 0 {
		return nil
	}
	if e := s.executor(); e != nil {
		for _, a := range marked {
			failpoint.Hit(failpoint.AbortCascade)
			e.Abort(a.ActionKey)
		}
	}
	return nil
}

// userIdentity is the identity of a user known by subject only (nil for
// none): who aborted, who signalled.
func userIdentity(subject string) *common.EnrichedIdentity {
	if subject == "" {
		return nil
	}
	return &common.EnrichedIdentity{Principal: &common.EnrichedIdentity_User{User: &common.User{
		Id: &common.UserIdentifier{Subject: subject},
	}}}
}
