package reports

// This file owns browsing stored runs over HTTP (`chaos serve`): the index
// at /, and every run directory read-only below /<run-id>/, with report.html
// rendered on demand when it is missing or older than what it is rendered
// from. Files are served through an os.Root, so neither ".." nor a symlink
// can reach outside the runs folder; only GET and HEAD are answered.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/rundir"
)

// reportVersion is stamped into every report; a report from another version
// of the renderer counts as outdated, so `chaos serve` re-renders it.
const reportVersion = "zkchaos reports v1"

// CheckListenAddr refuses addresses that are not loopback unless
// allowRemote: run directories hold logs and data that should not be
// published on a shared network by accident. An empty host (":8080") means
// every interface and is refused too.
func CheckListenAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q is not loopback: run directories would be reachable from other machines; use 127.0.0.1 or pass --allow-remote", addr)
	}
	return nil
}

// Server serves a runs folder.
type Server struct {
	dir   string
	files http.Handler
	// mu serialises report rendering: a big history takes seconds and a lot
	// of memory, and two requests for the same report should render once.
	mu sync.Mutex
	// Logf receives render errors and on-demand renders; default log.Printf.
	Logf func(format string, args ...any)
}

// NewServer serves runsDir, which must exist.
func NewServer(runsDir string) (*Server, error) {
	root, err := os.OpenRoot(runsDir)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return &Server{dir: runsDir, files: http.FileServerFS(root.FS()), Logf: log.Printf}, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	if p == "/" || p == "/index.html" {
		s.serveIndex(w, r)
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)
	id := parts[0]
	if len(parts) == 2 && parts[1] == rundir.ReportFile && id != "." && id != ".." {
		runDir := filepath.Join(s.dir, id)
		if fi, err := os.Stat(runDir); err != nil || !fi.IsDir() {
			http.NotFound(w, r)
			return
		}
		if err := s.ensureReport(runDir); err != nil {
			s.Logf("serve: %v", err)
			http.Error(w, "cannot render the report: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	// Run files are immutable history; don't let browsers reuse a stale
	// report after a re-render.
	w.Header().Set("Cache-Control", "no-cache")
	s.files.ServeHTTP(w, r)
}

func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	runs, err := Index(s.dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	abs, _ := filepath.Abs(s.dir)
	if err := writeIndex(&buf, "chaos runs in "+abs, runs, powerTable(s.dir)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(buf.Bytes()))
}

// ensureReport renders runDir's report when it is missing or outdated.
func (s *Server) ensureReport(runDir string) error {
	if !ReportOutdated(runDir) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ReportOutdated(runDir) { // rendered while we waited
		return nil
	}
	start := time.Now()
	p, err := RenderHTML(runDir)
	if err != nil {
		return err
	}
	s.Logf("serve: rendered %s in %s", p, time.Since(start).Round(time.Millisecond))
	return nil
}

// ReportOutdated tells whether RUN_DIR/report.html is missing, was made by
// another renderer version, or is older than a file it is rendered from
// (results.json, run.json, schedule.json, the history files, the logs).
func ReportOutdated(runDir string) bool {
	rp := filepath.Join(runDir, rundir.ReportFile)
	fi, err := os.Stat(rp)
	if err != nil {
		return true
	}
	if !hasVersion(rp) {
		return true
	}
	newer := func(p string) bool {
		si, err := os.Stat(p)
		return err == nil && si.ModTime().After(fi.ModTime())
	}
	for _, f := range []string{rundir.ResultsFile, rundir.RunFile, rundir.ScheduleFile, rundir.LinearizeFile, rundir.HistoryDir, rundir.LogsDir} {
		if newer(filepath.Join(runDir, f)) {
			return true
		}
	}
	hs, _ := filepath.Glob(filepath.Join(runDir, rundir.HistoryDir, "*.jsonl"))
	for _, h := range hs {
		if newer(h) {
			return true
		}
	}
	return false
}

// hasVersion reads the head of a report for the renderer version stamp.
func hasVersion(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 1024)
	n, err := f.Read(head)
	if err != nil && !errors.Is(err, fs.ErrClosed) && n == 0 {
		return false
	}
	return bytes.Contains(head[:n], []byte(reportVersion))
}
