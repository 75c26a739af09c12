// Package oidcauth trusts an external OpenID Connect provider (auth.oidc):
// it discovers the provider's endpoints and keys, verifies the JWTs it
// issues into principals bound to roles by auth.bindings, and forwards the
// SDK's interactive grants from the manager's token endpoint to the
// provider's. internal/oidctest is a provider for tests.
package oidcauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Endpoints are what the provider's discovery document advertises.
type Endpoints struct {
	Issuer        string `json:"issuer"`
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
	Device        string `json:"device_authorization_endpoint"`
	JWKS          string `json:"jwks_uri"`
}

// maxDocument bounds a discovery document or key set read from the provider.
const maxDocument = 1 << 20

// discoveryRetry is how long a failed discovery is remembered before the
// next caller tries again, so an unreachable provider is not asked once
// per request.
const discoveryRetry = 5 * time.Second

// Discovery fetches the provider's discovery document once it is first
// needed and keeps it (a failure is retried after discoveryRetry).
type Discovery struct {
	issuer string
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	doc      *Endpoints
	err      error
	failedAt time.Time
}

// NewDiscovery returns the discovery of issuer over client (nil for
// http.DefaultClient).
func NewDiscovery(issuer string, client *http.Client) *Discovery {
	if client == nil {
		client = http.DefaultClient
	}
	return &Discovery{issuer: strings.TrimSuffix(issuer, "/"), client: client, now: time.Now}
}

// ErrProviderUnavailable is a provider that could not be reached or
// answered something unusable; the detail is for the log.
var ErrProviderUnavailable = errors.New("the identity provider is unavailable")

// Endpoints returns the provider's endpoints.
func (d *Discovery) Endpoints(ctx context.Context) (Endpoints, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.doc != nil {
		return *d.doc, nil
	}
	if d.err != nil && d.now().Sub(d.failedAt) < discoveryRetry {
		return Endpoints{}, d.err
	}
	doc, err := d.fetch(ctx)
	if err != nil {
		d.err, d.failedAt = fmt.Errorf("%w: discovery of %s: %v", ErrProviderUnavailable, d.issuer, err), d.now()
		return Endpoints{}, d.err
	}
	d.doc, d.err = &doc, nil
	return doc, nil
}

func (d *Discovery) fetch(ctx context.Context) (Endpoints, error) {
	var doc Endpoints
	if err := getJSON(ctx, d.client, d.issuer+"/.well-known/openid-configuration", &doc); err != nil {
		return doc, err
	}
	// OpenID Connect Discovery §4.3: the document names the issuer it
	// was fetched for, or it is not that issuer's.
	if strings.TrimSuffix(doc.Issuer, "/") != d.issuer {
		return doc, fmt.Errorf("the document names issuer %q", doc.Issuer)
	}
	if doc.JWKS == "" || doc.Token == "" {
		return doc, errors.New("the document names no jwks_uri or token_endpoint")
	}
	return doc, nil
}

func getJSON(ctx context.Context, client *http.Client, url string, into any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %v", url, err)
	}
	return nil
}
