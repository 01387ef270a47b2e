package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkchaos/zkchaos/faults"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
	"github.com/zkchaos/zkchaos/rundir"
)

// ControlDriver is the driver of `chaos up`: the user's own program is the
// workload, and faults come from `chaos fault` while it runs. It holds the
// cluster until Stop is closed (or Hold passes) and serves, on 127.0.0.1
// only, the faults of the nemesis catalogue and their heal; the address goes
// into RUN_DIR/control.json (rundir.Control), which `chaos fault` reads.
// Every fault goes through the run's nemesis, so it is recorded in
// history/nemesis.jsonl like a scheduled one, and the run directory can be
// checked afterwards.
type ControlDriver struct {
	Topic string
	// Ready is called once the control listener is up and control.json
	// written, with what it holds.
	Ready func(c rundir.Control)
	// Stop ends the hold (Ctrl-C); nil waits for Hold or the run's end.
	Stop <-chan struct{}
	// Hold ends the hold after this long; 0 waits for Stop.
	Hold time.Duration
}

// controlAnswer is what the control endpoint answers.
type controlAnswer struct {
	Message string   `json:"message,omitempty"`
	Error   string   `json:"error,omitempty"`
	Active  []string `json:"active,omitempty"`
}

// Drive implements Driver.
func (d *ControlDriver) Drive(ctx context.Context, l *Live) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("control listener: %w", err)
	}
	s := &controlServer{ctx: ctx, live: l}
	srv := &http.Server{Handler: s.mux(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-served
	}()

	c := rundir.Control{Addr: ln.Addr().String(), PID: os.Getpid(), Bootstrap: brokerAddrs(l.Cluster),
		ZooKeeper: l.Cluster.ZKConnect(), Topic: d.Topic}
	if err := rundir.WriteControl(l.RunDir, c); err != nil {
		return err
	}
	defer rundir.RemoveControl(l.RunDir)
	if d.Ready != nil {
		d.Ready(c)
	}
	var hold <-chan time.Time
	if d.Hold > 0 {
		t := time.NewTimer(d.Hold)
		defer t.Stop()
		hold = t.C
	}
	select {
	case <-ctx.Done():
	case <-d.Stop:
	case <-hold:
	}
	return s.heal(context.WithoutCancel(ctx))
}

// controlServer serves one run's faults; one request at a time, as a
// nemesis applies one fault at a time.
type controlServer struct {
	ctx  context.Context // the run's: faults outlive the request that started them
	live *Live
	mu   sync.Mutex
	open []openControl
}

type openControl struct {
	kind nemesis.FaultKind
	heal nemesis.Heal
}

func (s *controlServer) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /fault/{kind}", s.fault)
	m.HandleFunc("POST /heal", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		n := len(s.open)
		s.mu.Unlock()
		if err := s.heal(s.ctx); err != nil {
			answer(w, http.StatusInternalServerError, controlAnswer{Error: "heal: " + err.Error()})
			return
		}
		answer(w, http.StatusOK, controlAnswer{Message: fmt.Sprintf("healed %d faults", n)})
	})
	m.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, http.StatusOK, controlAnswer{Active: s.active()})
	})
	return m
}

func (s *controlServer) active() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, o := range s.open {
		out = append(out, string(o.kind))
	}
	return out
}

func (s *controlServer) fault(w http.ResponseWriter, r *http.Request) {
	kind := nemesis.FaultKind(r.PathValue("kind"))
	f, ok := faults.Lookup(kind)
	if !ok {
		answer(w, http.StatusBadRequest, controlAnswer{Error: fmt.Sprintf("unknown fault %q; the catalogue: %s", kind, catalogueNames())})
		return
	}
	pick := 0
	if p := r.URL.Query().Get("pick"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			answer(w, http.StatusBadRequest, controlAnswer{Error: fmt.Sprintf("pick %q: want a number >= 0", p)})
			return
		}
		pick = n
	}
	topo := faults.Topology{Nodes: len(s.live.World.Nodes()), ZKServers: len(s.live.World.ZKServers())}
	if err := f.Available(topo); err != nil {
		answer(w, http.StatusBadRequest, controlAnswer{Error: err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mark := s.live.Nemesis.Rec.Mark()
	heal, err := s.live.Faults.Inject(s.ctx, kind, pick)
	if err != nil {
		answer(w, http.StatusInternalServerError, controlAnswer{Error: fmt.Sprintf("%s: %v", kind, err)})
		return
	}
	s.open = append(s.open, openControl{kind, heal})
	hit := hitList(s.live.Nemesis.Rec.StartedSince(mark))
	s.live.Note("fault %s injected%s", kind, hit)
	answer(w, http.StatusOK, controlAnswer{Message: fmt.Sprintf("%s injected%s (%s); `chaos fault heal` ends it", kind, hit, f.Doc())})
}

// hitList names what the primitives of one injection did, as ": pause n2,
// partition n1 | n2 n3 zk1": a fault that picks a random broker must say
// which one, or the user cannot tell what broke.
func hitList(fs []history.Fault) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, strings.TrimSpace(f.Name+" "+strings.Join(f.Targets, " ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

// heal ends every fault started here, newest first, then whatever else the
// nemesis holds (a fault that failed half-way).
func (s *controlServer) heal(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for i := len(s.open) - 1; i >= 0; i-- {
		if h := s.open[i].heal; h != nil {
			if err := h(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.open[i].kind, err))
			}
		}
	}
	n := len(s.open)
	s.open = nil
	errs = append(errs, s.live.Nemesis.Heal(ctx))
	if n > 0 {
		s.live.Note("healed %d faults", n)
	}
	return errors.Join(errs...)
}

func answer(w http.ResponseWriter, status int, a controlAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(a)
}

func catalogueNames() string {
	var names []string
	for _, k := range faults.Catalogue {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// SendFault asks the `chaos up` process running on runDir to inject a fault
// of kind (pick chooses among candidates), or, for kind "heal", to heal
// every fault. It returns the process's answer.
func SendFault(ctx context.Context, runDir, kind string, pick int) (string, error) {
	c, err := rundir.ReadControl(runDir)
	if err != nil {
		return "", err
	}
	url := "http://" + c.Addr + "/fault/" + kind + "?pick=" + strconv.Itoa(pick)
	if kind == "heal" {
		url = "http://" + c.Addr + "/heal"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("chaos up at %s (pid %d, from %s): %w", c.Addr, c.PID, rundir.ControlFile, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("answer of chaos up at %s: %w", c.Addr, err)
	}
	var a controlAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return "", fmt.Errorf("answer of chaos up at %s (status %s): %q", c.Addr, resp.Status, b)
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(a.Error)
	}
	return a.Message, nil
}
