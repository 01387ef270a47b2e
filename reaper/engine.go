package reaper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// Engine removes a run's objects through the Docker Engine API on a unix
// socket. It speaks the few calls a removal needs with net/http instead of
// the Engine client module, which would make the program several times
// larger and slower to link at every run's start.
type Engine struct {
	hc *http.Client
}

// NewEngine talks to the engine listening on the unix socket at path.
func NewEngine(path string) *Engine {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialUnix(ctx, path)
		},
	}
	return &Engine{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Removed counts what RemoveLabelled removed.
type Removed struct {
	Containers int
	Networks   int
}

// RemoveLabelled removes every container (except the one named keep) and
// every network that carries all of labels ("key=value"): containers first,
// side by side, since a network with a container attached cannot go. An
// object already gone counts as removed by someone else, not as a failure.
// It keeps going past a failed removal and returns every failure joined.
func (e *Engine) RemoveLabelled(ctx context.Context, labels []string, keep string) (Removed, error) {
	var rep Removed
	if len(labels) == 0 {
		// An empty filter selects everything on the engine.
		return rep, errors.New("reaper: no labels to select by")
	}
	filter, err := json.Marshal(map[string][]string{"label": labels})
	if err != nil {
		return rep, err
	}
	q := url.Values{"all": {"1"}, "filters": {string(filter)}}
	var cs []struct {
		ID    string   `json:"Id"`
		Names []string `json:"Names"`
	}
	if err := e.get(ctx, "/containers/json?"+q.Encode(), &cs); err != nil {
		return rep, fmt.Errorf("list containers: %w", err)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, c := range cs {
		if keep != "" && slices.Contains(c.Names, "/"+keep) {
			continue
		}
		wg.Go(func() {
			err := e.remove(ctx, "/containers/"+url.PathEscape(c.ID)+"?force=1&v=1")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
				return
			}
			rep.Containers++
		})
	}
	wg.Wait()
	var ns []struct {
		ID string `json:"Id"`
	}
	if err := e.get(ctx, "/networks?"+url.Values{"filters": {string(filter)}}.Encode(), &ns); err != nil {
		return rep, errors.Join(append(errs, fmt.Errorf("list networks: %w", err))...)
	}
	for _, n := range ns {
		if err := e.remove(ctx, "/networks/"+url.PathEscape(n.ID)); err != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.ID, err))
			continue
		}
		rep.Networks++
	}
	return rep, errors.Join(errs...)
}

// The host part is ignored: the transport always dials the socket.
const base = "http://engine"

// do sends a request without a body to the engine.
func (e *Engine) do(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return nil, err
	}
	return e.hc.Do(req)
}

func (e *Engine) get(ctx context.Context, path string, into any) error {
	res, err := e.do(ctx, http.MethodGet, path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return engineError(res)
	}
	if err := json.NewDecoder(res.Body).Decode(into); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// remove sends DELETE path; 404 (already gone) is success.
func (e *Engine) remove(ctx context.Context, path string) error {
	res, err := e.do(ctx, http.MethodDelete, path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 == 2 || res.StatusCode == http.StatusNotFound {
		io.Copy(io.Discard, res.Body)
		return nil
	}
	return engineError(res)
}

func engineError(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	var msg struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &msg) == nil && msg.Message != "" {
		return fmt.Errorf("engine: %s: %s", res.Status, msg.Message)
	}
	return fmt.Errorf("engine: %s", res.Status)
}
