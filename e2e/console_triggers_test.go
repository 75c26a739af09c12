package e2e

import (
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/trigger"
	"fmgr.dev/gen/go/flyteidl2/trigger/triggerconnect"
	"fmgr.dev/internal/dbtest"
)

// The triggers page lists a project's triggers with their schedules, when
// each last fired and the runs it made; its switch deactivates one.
func TestConsoleTriggers(t *testing.T) {
	ctx := scenarioContext(t, 10*time.Minute)
	m := startSDKManager(t, dbtest.SQLiteDSN(t), "FLYTE_MANAGER_TRIGGERS_MINUTE="+triggerMinute.String())
	deployTriggers(t, ctx, m)
	fired := waitFirings(t, ctx, m, 1)

	b := newBrowser(t, 0)
	b.open(m.URL + "/v2/projects")
	b.waitText("#projects", "flytesnacks")
	b.run("follow the project's triggers link", chromedp.Click(css(`[data-project="flytesnacks"] a[href$="/development/project/flytesnacks/triggers"]`)))
	b.waitText(`#triggers [data-trigger="every"] .schedule`, "every 1 minute")
	b.waitText(`#triggers [data-trigger="manual"] .schedule`, "by name only")
	b.run("the trigger's runs", chromedp.WaitVisible(css(`#triggers [data-trigger="every"] .runs [data-run="`+fired[0].run+`"]`)))
	b.run("its latest firing", chromedp.WaitVisible(css(`#triggers [data-trigger="every"] .fired time`)))
	// Its next firing, from the manager: after the latest one, within one
	// interval of it; none for the trigger run by name only.
	b.run("its next firing", chromedp.WaitVisible(css(`#triggers [data-trigger="every"] .next time`)))
	if ok := eval[bool](b, `(() => {
		const row = document.querySelector('#triggers [data-trigger="every"]');
		const next = Date.parse(row.querySelector('.next time').getAttribute('datetime'));
		const last = Date.parse(row.querySelector('.fired time').getAttribute('datetime'));
		return next > last - 1000 && next <= last + `+fmt.Sprint(triggerMinute.Milliseconds())+` + 1000;
	})()`); !ok {
		t.Error("the next firing is not one interval after the latest")
	}
	b.waitText(`#triggers [data-trigger="manual"] .next`, "not scheduled")
	// The page follows the schedule: once the next firing passes, the
	// latest firing moves on without a reload.
	first := eval[string](b, `document.querySelector('#triggers [data-trigger="every"] .fired time').getAttribute('datetime')`)
	b.waitJS("the latest firing moves on", fmt.Sprintf(`(() => {
		const t = document.querySelector('#triggers [data-trigger="every"] .fired time');
		return !!t && Date.parse(t.getAttribute('datetime')) > Date.parse(%q);
	})()`, first))
	if on := eval[bool](b, `document.querySelector('#triggers [data-trigger="every"] input.active').checked`); !on {
		t.Fatal("the switch of an active trigger is off")
	}
	b.screenshot("triggers")

	b.run("switch it off", chromedp.Click(css(`#triggers [data-trigger="every"] input.active`)))
	client := triggerconnect.NewTriggerServiceClient(rpcClient, m.URL)
	name := &common.TriggerName{Project: testProject, Domain: testDomain, TaskName: stampTask, Name: "every"}
	b.waitJS("the switch settled", `!document.querySelector('#triggers [data-trigger="every"] input.active').disabled`)
	got, err := client.GetTriggerDetails(ctx, connect.NewRequest(&trigger.GetTriggerDetailsRequest{Name: name}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Msg.GetTrigger().GetSpec().GetActive() {
		t.Error("the trigger is still active after its switch was turned off")
	}
	b.waitText(`#triggers [data-trigger="every"] label`, "off")
	b.waitText(`#triggers [data-trigger="every"] .next`, "switched off")
}
