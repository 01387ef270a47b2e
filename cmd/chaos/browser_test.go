package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the failing report's screenshot to docs/report.png")

// browserRun is the stored failing run the browser tests render: a real
// KAFKA-532 reproduction kept by `chaos keep` (history, run.json).
const browserRun = "../../testdata/regressions/kafka-532-zombie-controller"

// findChromium returns a headless-capable Chromium. Under CI=true a missing
// browser fails the test: a CI job that skipped it would prove nothing.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and no chromium on PATH: scripts/setup.sh installs Debian's chromium package")
	}
	t.Skip("no chromium on PATH (scripts/setup.sh installs it)")
	return ""
}

// page is one browser tab with what it saw: console errors, uncaught
// exceptions and every request it made.
type page struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	requests []string
}

func (p *page) add(list *[]string, s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	*list = append(*list, s)
}

func (p *page) snapshot() (problems, requests []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...), append([]string(nil), p.requests...)
}

func openBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := findChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // tests may run as root
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	return bctx
}

// open loads file in a new tab of the browser and records what it does.
func open(t *testing.T, bctx context.Context, file string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelT)
	p := &page{ctx: ctx}
	// Subscribe before navigating so nothing the page does is missed.
	messages := chromedp.Console(ctx)
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				p.add(&p.problems, m.String())
			}
		}
	}()
	go func() {
		for r, err := range requests {
			if err != nil {
				return
			}
			p.add(&p.requests, r.Request.URL)
		}
	}()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	u := (&url.URL{Scheme: "file", Path: abs}).String()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, struct{}{}); err != nil {
		t.Fatal(err)
	}
	// The copy check reads the clipboard back, which a page may do only
	// with this permission.
	for _, perm := range []*browser.PermissionDescriptor{
		{Name: "clipboard-read"}, {Name: "clipboard-write", AllowWithoutSanitization: true},
	} {
		if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: perm, Setting: browser.PermissionSettingGranted,
		}); err != nil {
			t.Fatalf("grant %s: %v", perm.Name, err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	return p
}

// leaving returns the requests that went anywhere but file itself (and
// data: or about: URLs the page builds).
func leaving(requests []string, file string) []string {
	abs, _ := filepath.Abs(file)
	self := (&url.URL{Scheme: "file", Path: abs}).String()
	var out []string
	for _, r := range requests {
		if r == self || strings.HasPrefix(r, "data:") || strings.HasPrefix(r, "about:") || strings.HasPrefix(r, self+"#") {
			continue
		}
		out = append(out, r)
	}
	return out
}

// renderFailingRun checks and renders the stored run with the real CLI into
// RUNS/kept/report.html and RUNS/index.html, and returns RUNS.
func renderFailingRun(t *testing.T) string {
	t.Helper()
	runs := t.TempDir()
	dir := filepath.Join(runs, "kept")
	copyDir(t, browserRun, dir)
	if out, code := runCLI(t, "check", "--visualize=false", dir); code != exitInvalid {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "report", dir, "--index", runs); code != exitValid {
		t.Fatalf("report: exit %d\n%s", code, out)
	}
	return runs
}

// checkReport drives the report like a person and returns every way it
// misbehaved. It is a function (not assertions) so the test can also show
// that it notices a broken page.
func checkReport(t *testing.T, bctx context.Context, file string, shot *[]byte) []string {
	p := open(t, bctx, file)
	var bad []string
	ctx := p.ctx
	eval := func(expr string) error {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr, chromedp.EvalAwaitPromise))
		return err
	}

	// The copy button copies the replay command to the clipboard.
	want, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#replay")))
	if err != nil || strings.TrimSpace(want) == "" {
		return append(bad, fmt.Sprintf("no replay command on the page: %v", err))
	}
	var copied string
	err = eval(`navigator.clipboard.writeText("clipboard before the click")`)
	if err == nil {
		err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#replay + button")), chromedp.Sleep(300*time.Millisecond))
	}
	if err == nil {
		copied, err = chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	}
	switch {
	case err != nil:
		bad = append(bad, "copy button: "+err.Error())
	case strings.TrimSpace(copied) != strings.TrimSpace(want):
		bad = append(bad, fmt.Sprintf("copy button put %q on the clipboard, want the replay command %q", copied, want))
	}

	// Hovering a fault bar points at that bar, and it carries its details
	// (what, on which process, from when to when). The report uses the SVG
	// <title> tooltip, which the browser paints itself.
	type hoverInfo struct {
		Hovered bool    `json:"hovered"`
		Title   string  `json:"title"`
		X       float64 `json:"x"`
		Y       float64 `json:"y"`
	}
	pos, err := chromedp.Run(ctx, chromedp.Evaluate[hoverInfo](`(() => {
		const bar = document.querySelector('svg rect[fill="#e15759"]');
		if (!bar) return {x: -1, y: -1};
		bar.scrollIntoView({block: "center"});
		const r = bar.getBoundingClientRect();
		return {x: r.left + Math.min(r.width / 2, 40), y: r.top + r.height / 2};
	})()`))
	var hover hoverInfo
	if err == nil && pos.X >= 0 {
		err = chromedp.Do(ctx, chromedp.MouseEvent(chromedp.MouseMoved, pos.X, pos.Y), chromedp.Sleep(100*time.Millisecond))
		if err == nil {
			hover, err = chromedp.Run(ctx, chromedp.Evaluate[hoverInfo](fmt.Sprintf(`(() => {
				const el = document.elementFromPoint(%f, %f);
				const t = el && el.querySelector(':scope > title');
				return {hovered: !!el && el.matches(':hover') && el.getAttribute('fill') === '#e15759', title: t ? t.textContent : ''};
			})()`, pos.X, pos.Y)))
		}
	}
	switch {
	case err != nil:
		bad = append(bad, "hover: "+err.Error())
	case pos.X < 0:
		bad = append(bad, "no fault bar in the timeline")
	case !hover.Hovered || !strings.Contains(hover.Title, "→") || !strings.Contains(hover.Title, ", by "):
		bad = append(bad, fmt.Sprintf("hovering the fault bar: hovered=%v, details %q (want the fault and its times)", hover.Hovered, hover.Title))
	}

	// The checker's link jumps to its violations, and a violation marker in
	// the timeline to the violation's events: each scrolls its target into
	// the window and highlights it (the checker's section, the violation).
	for _, l := range []struct{ what, sel string }{
		{"checker's violations link", `td a[href^="#c"]`},
		{"timeline violation marker", `svg a[href^="#v"]`},
	} {
		if msg := followLink(ctx, l.sel); msg != "" {
			bad = append(bad, l.what+": "+msg)
		}
	}

	if shot != nil {
		// Tall enough for the verdict, the checkers and the timeline.
		err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 1750))
		if err == nil {
			err = eval(`window.scrollTo(0, 0)`)
		}
		if err == nil {
			*shot, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
		}
		if err != nil {
			bad = append(bad, "screenshot: "+err.Error())
		}
	}
	time.Sleep(200 * time.Millisecond) // let the last console events arrive
	problems, requests := p.snapshot()
	bad = append(bad, problems...)
	for _, r := range leaving(requests, file) {
		bad = append(bad, "request left the file: "+r)
	}
	return bad
}

// followLink clicks the first link matching sel and returns what is wrong
// with where it led ("" when its target is in the window and its
// background changed).
func followLink(pctx context.Context, sel string) string {
	ctx, cancel := context.WithTimeout(pctx, 10*time.Second)
	defer cancel()
	type linkInfo struct {
		Href   string  `json:"href"`
		Target string  `json:"target"`
		Top    float64 `json:"top"`
		Height float64 `json:"height"`
		Bg     string  `json:"bg"`
	}
	probe := `(() => {
		const a = document.querySelector('` + sel + `');
		if (!a) return {href: ''};
		const id = (a.getAttribute('href') || a.getAttribute('xlink:href')).slice(1);
		const el = document.getElementById(id);
		if (!el) return {href: id};
		const t = document.querySelector(':target');
		const r = el.getBoundingClientRect();
		return {href: id, target: t ? t.id : '', top: r.top, height: window.innerHeight, bg: getComputedStyle(el).backgroundColor};
	})()`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`history.replaceState(null, '', location.pathname); window.scrollTo(0, 0)`)); err != nil {
		return err.Error()
	}
	before, err := chromedp.Run(ctx, chromedp.Evaluate[linkInfo](probe))
	if err != nil {
		return err.Error()
	}
	if before.Href == "" {
		return "no link " + sel + " on the page"
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)), chromedp.Sleep(300*time.Millisecond)); err != nil {
		return "click: " + err.Error()
	}
	after, err := chromedp.Run(ctx, chromedp.Evaluate[linkInfo](probe))
	switch {
	case err != nil:
		return err.Error()
	case after.Target != after.Href:
		return fmt.Sprintf("after the click the target is %q, want %q", after.Target, after.Href)
	case after.Top < -2 || after.Top > after.Height: // sub-pixel scrolling may leave it a fraction above
		return fmt.Sprintf("#%s is at y=%.0f, outside the %.0fpx window: the link did not scroll to it", after.Href, after.Top, after.Height)
	case after.Bg == before.Bg:
		return fmt.Sprintf("#%s is not highlighted (background %s before and after)", after.Href, after.Bg)
	}
	return ""
}

func TestReportInBrowser(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("browser test skipped in -short mode")
	}
	bctx := openBrowser(t)
	runs := renderFailingRun(t)
	report := filepath.Join(runs, "kept", "report.html")

	var shot []byte
	for _, b := range checkReport(t, bctx, report, &shot) {
		t.Error(b)
	}
	if *updateScreenshot && len(shot) > 0 {
		if err := os.WriteFile("../../docs/report.png", shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The runs index: loads clean, stays in its folder, links the report.
	t.Run("index", func(t *testing.T) {
		index := filepath.Join(runs, "index.html")
		p := open(t, bctx, index)
		err := chromedp.Do(p.ctx,
			chromedp.Click(chromedp.CSS(`a[href="kept/report.html"]`)),
			chromedp.WaitReady(chromedp.CSS(`#replay`)),
		)
		if err != nil {
			t.Fatalf("index link to the report: %v", err)
		}
		loc, err := chromedp.Run(p.ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if !strings.HasSuffix(loc, "/kept/report.html") {
			t.Errorf("index link led to %s", loc)
		}
		problems, requests := p.snapshot()
		for _, b := range problems {
			t.Error(b)
		}
		abs, _ := filepath.Abs(runs)
		for _, r := range requests {
			if !strings.HasPrefix(r, "file://"+abs+"/") {
				t.Errorf("request left the runs folder: %s", r)
			}
		}
	})

	// The checks must notice a broken page: the same report with its copy
	// script broken, and with a script that throws.
	t.Run("notices a broken script", func(t *testing.T) {
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, from, to string }{
			{"copy handler", "navigator.clipboard.writeText(", "navigator.clipboard.writeTxt("},
			{"throwing script", "</body>", "<script>undefinedFunction()</script></body>"},
		} {
			if !strings.Contains(string(b), tc.from) {
				t.Fatalf("report no longer contains %q", tc.from)
			}
			broken := filepath.Join(t.TempDir(), "report.html")
			if err := os.WriteFile(broken, []byte(strings.Replace(string(b), tc.from, tc.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			if bad := checkReport(t, bctx, broken, nil); len(bad) == 0 {
				t.Errorf("%s broken: the browser checks found nothing wrong", tc.name)
			} else {
				t.Logf("%s broken: %s", tc.name, strings.Join(bad, "; "))
			}
		}
	})
}
