// Package natsurl reads a NATS URL the way the nats.go client reads it: a
// comma-separated list of servers, each trimmed, with nats:// added to one
// that has no scheme. Whoever checks where a NATS connection may go checks
// every server of the list, parsed here, not the first one.
package natsurl

import (
	"fmt"
	"net/url"
	"strings"
)

// Servers returns every server of a NATS URL. Each has a host, and no path,
// query or fragment (nats.go ignores them; a secret could hide there). Its
// user, password or token (URL userinfo) is left for the caller to refuse.
func Servers(v string) ([]*url.URL, error) {
	var out []*url.URL
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if !strings.Contains(e, "://") {
			e = "nats://" + e
		}
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || u.Hostname() == "" {
			return nil, fmt.Errorf("server %d of the URL is not a URL with a host", len(out)+1)
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return nil, fmt.Errorf("server %d (%s) has a path, a query or a fragment; a NATS server URL is scheme://host:port", len(out)+1, u.Hostname())
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the URL names no server")
	}
	return out, nil
}
