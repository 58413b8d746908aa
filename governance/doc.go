// Package governance holds the four-eyes rules that are not a purge or an
// accept-as-new of their own: money declarations of operation classes,
// governed changes (a change that weakens a proof or switches four eyes off
// needs a second person, whose approval applies it) and entry plans
// (identities that enter the inbox without their effect running). The
// database enforces every rule; this package is its client.
package governance
