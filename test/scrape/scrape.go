// Package scrape GETs a metrics endpoint as Prometheus scrapes it, for the
// suites that scrape the operator and TF Serving: with a bearer token when
// there is one, and TLS as the scrape config has it.
package scrape

import (
	"crypto/tls"
	"io"
	"net/http"
	"time"
)

// Get GETs url with the token as a bearer ("" for none) and returns the
// status code and body.
func Get(url, token string, tlsConfig *tls.Config) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
