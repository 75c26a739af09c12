package main

import (
	"maps"
	"testing"
)

func TestSumSamples(t *testing.T) {
	const text = `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 3
apiserver_request_total{code="409",resource="pods",subresource="",verb="POST"} 2
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PUT"} 4.5 1700000000000
apiserver_request_total{code="200",resource="we\"ird,}",subresource="",verb="PUT"} 1
apiserver_request_totalx{code="201",resource="pods",subresource="",verb="POST"} 100
apiserver_request_total_other 7
apiserver_request_total 10
`
	got := sumSamples(text, "apiserver_request_total", func(l map[string]string) (string, bool) {
		if l["verb"] == "" {
			return "bare", true
		}
		return l["verb"] + " " + l["resource"] + "/" + l["subresource"], l["code"] != "409"
	})
	want := map[string]float64{"POST pods/": 3, "PUT pods/status": 4.5, `PUT we"ird,}/`: 1, "bare": 10}
	if !maps.Equal(got, want) {
		t.Errorf("sumSamples = %v, want %v", got, want)
	}
}
