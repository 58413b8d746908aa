package keys

import (
	"testing"

	"github.com/charmbracelet/bubbles/key"
)

// A view's action never takes a global key: the same key does the same thing
// in every view. Every binding has its help text.
func TestKeymapConsistent(t *testing.T) {
	t.Parallel()
	k := Default()
	global := map[string]string{}
	g := k.Global
	for _, b := range append([]key.Binding{g.Next, g.Prev, g.Help, g.Back, g.Quit, g.ForceQuit}, g.Views[:]...) {
		for _, s := range b.Keys() {
			global[s] = b.Help().Desc
		}
	}
	views := map[string][]key.Binding{
		"queue":     {k.Queue.Up, k.Queue.Down, k.Queue.PageUp, k.Queue.PageDown, k.Queue.Top, k.Queue.Bottom, k.Queue.Open, k.Queue.Status, k.Queue.Search, k.Queue.Refresh, k.Queue.Reject, k.Queue.Accept, k.Queue.NextPage, k.Queue.PrevPage, k.Queue.Select, k.Queue.Groups, k.Queue.Copy},
		"resolve":   {k.Resolve.Edit, k.Resolve.Run, k.Resolve.DryRun, k.Resolve.Load, k.Resolve.Clear, k.Resolve.OpenRec, k.Resolve.Toggle},
		"horizon":   {k.Horizon.Up, k.Horizon.Down, k.Horizon.Approve, k.Horizon.Purge, k.Horizon.Refresh},
		"approvals": {k.Approvals.Up, k.Approvals.Down, k.Approvals.Open, k.Approvals.Approve, k.Approvals.Refresh},
		"audit":     {k.Audit.Up, k.Audit.Down, k.Audit.Details, k.Audit.DetailsUp, k.Audit.DetailsDown, k.Audit.Verify, k.Audit.Refresh},
		// The reconcile view's mappings list, then a run's findings.
		"reconcile":          {k.Reconcile.Up, k.Reconcile.Down, k.Reconcile.Run, k.Reconcile.Refresh},
		"reconcile findings": {k.Reconcile.Up, k.Reconcile.Down, k.Reconcile.Open, k.Reconcile.Pin},
	}
	for name, bs := range views {
		seen := map[string]string{}
		for _, b := range bs {
			if b.Help().Key == "" || b.Help().Desc == "" {
				t.Errorf("%s: a binding %v has no help", name, b.Keys())
			}
			for _, s := range b.Keys() {
				if d, ok := global[s]; ok {
					t.Errorf("%s: %q (%s) is the global key for %s", name, s, b.Help().Desc, d)
				}
				if d, ok := seen[s]; ok {
					t.Errorf("%s: %q is bound to both %s and %s", name, s, d, b.Help().Desc)
				}
				seen[s] = b.Help().Desc
			}
		}
	}
	for i, v := range g.Views {
		if want := string(rune('1' + i)); v.Keys()[0] != want {
			t.Fatalf("views are on 1-%d: %v", len(g.Views), g.Views)
		}
	}
}

func TestCombinedHelp(t *testing.T) {
	t.Parallel()
	k := Default()
	c := Combined{View: Bindings{Short: []key.Binding{k.Queue.Open}}, Global: k.Global}
	short := c.ShortHelp()
	if short[0].Help().Desc != "open" || short[len(short)-1].Help().Desc != "quit" {
		t.Fatalf("short help: view keys first, quit last: %v", short)
	}
	c.Typing = true
	short = c.ShortHelp()
	if last := short[len(short)-1]; last.Keys()[0] != "ctrl+c" {
		t.Fatalf("while typing only ctrl+c quits: %v", last.Keys())
	}
	if n := len(c.FullHelp()); n != 3 {
		t.Fatalf("full help: the view's group and two global groups, got %d", n)
	}
}
