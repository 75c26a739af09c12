package oidcauth

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"fmgr.dev/internal/oidctest"
)

// The manager's token endpoint keeps client_credentials (API keys) and
// forwards the SDK's interactive grants to the provider unchanged.
func TestTokenEndpoint(t *testing.T) {
	iss := oidctest.New(t)
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Local", string(body))
	})
	srv := httptest.NewServer(TokenEndpoint(local, func(id string) bool { return strings.HasPrefix(id, "fmk") }, NewDiscovery(iss.URL, nil), nil, slog.New(slog.DiscardHandler)))
	defer srv.Close()

	resp, err := http.PostForm(srv.URL, url.Values{"grant_type": {"client_credentials"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Local"); got != "grant_type=client_credentials" {
		t.Errorf("client_credentials reached local with body %q", got)
	}

	// A device code from the provider, polled through the manager.
	resp, err = http.PostForm(iss.URL+"/device/code", url.Values{"client_id": {iss.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	var dev struct {
		DeviceCode string `json:"device_code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&dev)
	resp.Body.Close()
	resp, err = http.PostForm(srv.URL, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"},
		"device_code": {dev.DeviceCode}, "client_id": {iss.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || tok.AccessToken == "" || resp.Header.Get("X-Local") != "" {
		t.Fatalf("device_code through the manager: %s %+v", resp.Status, tok)
	}

	// The provider's refusal comes back as it was.
	resp, err = http.PostForm(srv.URL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"nope"}, "client_id": {iss.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_grant") {
		t.Errorf("bad refresh token: %s %s", resp.Status, body)
	}
}
