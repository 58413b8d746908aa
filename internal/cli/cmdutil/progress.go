package cmdutil

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/progress"
	"github.com/muesli/termenv"
)

// barView draws the bar itself: the TUI's progress component, in plain
// characters (a log or a pasted terminal keeps no colours).
var barView = progress.New(progress.WithWidth(24), progress.WithoutPercentage(),
	progress.WithFillCharacters('=', ' '), progress.WithColorProfile(termenv.Ascii))

// ProgressBar draws one self-overwriting line on stderr while a batch runs:
// done/total (when the total is known), a bar, the rate and an ETA. When
// stderr is not a terminal (cron, a Kubernetes job) it prints the same as
// one plain line every interval instead (like pgbench -P), so that a log
// shows the run moving and where it was when it stopped.
type ProgressBar struct {
	w     io.Writer
	label string
	total int64 // 0 when unknown
	read  func() int64
	start time.Time
	every time.Duration

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	width    int  // of the last line drawn, to clear it
	lines    bool // one line per interval, no bar, no carriage return

	// status, when set, says what holds the run up ("reconnecting ..."),
	// shown after the counts; "" when nothing does.
	status func() string
	// samples are the counts of the last recentWindow, for the recent rate.
	samples []progressSample
}

// progressSample is a count at a moment of the run.
type progressSample struct {
	at   time.Duration
	done int64
}

// recentWindow is how far back the rate shown looks: long enough to be
// steady, short enough that a run that stalls shows it within seconds.
const recentWindow = 10 * time.Second

// recentRate is the rate over the last recentWindow, counting this sample.
func (p *ProgressBar) recentRate(done int64, elapsed time.Duration) float64 {
	p.samples = append(p.samples, progressSample{at: elapsed, done: done})
	for len(p.samples) > 2 && elapsed-p.samples[1].at >= recentWindow {
		p.samples = p.samples[1:]
	}
	first := p.samples[0]
	if dt := (elapsed - first.at).Seconds(); dt > 0 {
		return float64(done-first.done) / dt
	}
	return 0
}

// DefaultProgressInterval is how often a run without a terminal logs its
// progress.
const DefaultProgressInterval = 10 * time.Second

// StartProgress starts the progress display a run on ios gets: the bar on
// a terminal, a line every interval otherwise (none when interval is 0).
// It returns nil when there is none; Stop on nil does nothing.
func StartProgress(ios *IOStreams, label string, total int64, read func() int64, interval time.Duration) *ProgressBar {
	return StartProgressWith(ios, label, total, read, nil, interval)
}

// StartProgressWith is StartProgress with what holds the run up, when
// something does (status returns "" otherwise).
func StartProgressWith(ios *IOStreams, label string, total int64, read func() int64, status func() string, interval time.Duration) *ProgressBar {
	p := newProgressBar(ios.ErrOut, label, total, read)
	p.status = status
	if !ios.IsStderrTTY() {
		if interval <= 0 {
			return nil
		}
		p.lines, p.every = true, interval
	}
	p.Start()
	return p
}

func newProgressBar(w io.Writer, label string, total int64, read func() int64) *ProgressBar {
	return &ProgressBar{w: w, label: label, total: total, read: read, every: 200 * time.Millisecond,
		stop: make(chan struct{}), done: make(chan struct{})}
}

// Start draws the bar until Stop.
func (p *ProgressBar) Start() {
	p.start = time.Now()
	p.samples = []progressSample{{at: 0, done: 0}}
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw(time.Now())
			case <-p.stop:
				return
			}
		}
	}()
}

// Stop erases the bar, leaving the terminal line clean for the summary.
func (p *ProgressBar) Stop() {
	if p == nil {
		return
	}
	p.stopOnce.Do(func() {
		close(p.stop)
		<-p.done
		if p.width > 0 {
			fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		}
	})
}

func (p *ProgressBar) draw(now time.Time) {
	done, elapsed := p.read(), now.Sub(p.start)
	rate, status := p.recentRate(done, elapsed), ""
	if p.status != nil {
		status = p.status()
	}
	if p.lines {
		fmt.Fprintln(p.w, p.renderLine(done, elapsed, rate, status))
		return
	}
	line := p.render(done, rate, status)
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	p.width = len(line)
	fmt.Fprint(p.w, "\r"+line+pad)
}

// render formats one state of the bar: done, the recent rate (per second)
// and what holds the run up, if anything; pure, for tests.
func (p *ProgressBar) render(done int64, rate float64, status string) string {
	var b strings.Builder
	b.WriteString(p.label)
	b.WriteByte(' ')
	if p.total > 0 {
		frac := min(float64(done)/float64(p.total), 1)
		b.WriteString("[" + barView.ViewAs(frac) + "] ")
		fmt.Fprintf(&b, "%s/%s %3.0f%%", HumanCount(done), HumanCount(p.total), frac*100)
	} else {
		b.WriteString(HumanCount(done))
	}
	fmt.Fprintf(&b, "  %s/s", HumanCount(int64(rate)))
	if p.total > 0 {
		eta := "--:--"
		if rate > 0 && done <= p.total {
			eta = formatClock(time.Duration(float64(p.total-done) / rate * float64(time.Second)))
		}
		b.WriteString("  ETA " + eta)
	}
	if status != "" {
		b.WriteString("  " + status)
	}
	return b.String()
}

// renderLine is one progress line for a log: label, done/total and percent,
// recent rate, elapsed and ETA, and what holds the run up, without a bar.
func (p *ProgressBar) renderLine(done int64, elapsed time.Duration, rate float64, status string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: progress %s", p.label, HumanCount(done))
	if p.total > 0 {
		fmt.Fprintf(&b, "/%s (%.0f%%)", HumanCount(p.total), min(float64(done)/float64(p.total), 1)*100)
	}
	fmt.Fprintf(&b, ", %s/s, elapsed %s", HumanCount(int64(rate)), formatClock(elapsed))
	if p.total > 0 && rate > 0 && done <= p.total {
		fmt.Fprintf(&b, ", ETA %s", formatClock(time.Duration(float64(p.total-done)/rate*float64(time.Second))))
	}
	if status != "" {
		b.WriteString(", " + status)
	}
	return b.String()
}

// HumanCount writes n with thousands separators: 1,234,567.
func HumanCount(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func formatClock(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", m, s)
}

// CountOf is n and its noun, singular for one: "1 operation", "1,204 operations".
func CountOf(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return HumanCount(n) + " " + noun + "s"
}
