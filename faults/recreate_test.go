package faults

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/nemesis"
)

// topicsWorld is a fake Env.Topics: the controller "deletes" a topic whose
// deletion was asked for once deleteAfter has passed.
type topicsWorld struct {
	mu          sync.Mutex
	spread      string
	topics      map[string]map[int32][]int
	asked       map[string]time.Time
	deleteAfter time.Duration
	calls       []string
}

func (w *topicsWorld) RecreatableTopic() (string, bool) { return w.spread, w.spread != "" }

func (w *topicsWorld) RequestTopicDeletion(_ context.Context, topic string) (map[int32][]int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, "delete "+topic)
	a, ok := w.topics[topic]
	if !ok {
		return nil, errors.New("no such topic")
	}
	w.asked[topic] = time.Now()
	return a, nil
}

func (w *topicsWorld) TopicExists(_ context.Context, topic string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if at, ok := w.asked[topic]; ok && time.Since(at) >= w.deleteAfter {
		delete(w.topics, topic)
		delete(w.asked, topic)
	}
	_, ok := w.topics[topic]
	return ok, nil
}

func (w *topicsWorld) CreateTopic(_ context.Context, topic string, a map[int32][]int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, "create "+topic)
	w.topics[topic] = a
	return nil
}

// delete-recreate-topic asks for the spread topic's deletion when the step
// starts; its heal waits for the controller to remove the topic (held back
// here 3 s, as by a replica whose broker another fault keeps down) and
// creates it again with the assignment it had; the fault's window says so.
// A run without such a topic gets the step refused; a deletion that never
// finishes makes the heal fail without creating anything.
func TestDeleteRecreateTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		assign := map[int32][]int{0: {1, 2}, 1: {2, 3}, 2: {3, 1}}
		w := &topicsWorld{spread: "chaos-rf2", topics: map[string]map[int32][]int{"chaos-rf2": assign}, asked: map[string]time.Time{}, deleteAfter: 3 * time.Second}
		var buf bytes.Buffer
		rec := nemesis.NewRecorder(history.NewWriter(&buf, "nemesis", 0))
		f := &topicRecreate{topics: w, rec: rec, within: recreateWithin}
		begin := time.Now()
		heal, err := f.inject(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := heal(t.Context()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took < 3*time.Second {
			t.Fatalf("heal returned after %s, before the controller removed the topic", took)
		}
		if !slices.Equal(w.calls, []string{"delete chaos-rf2", "create chaos-rf2"}) {
			t.Fatalf("calls %q", w.calls)
		}
		if got := w.topics["chaos-rf2"]; len(got) != 3 || !slices.Equal(got[1], []int{2, 3}) {
			t.Fatalf("created again with %v, want %v", got, assign)
		}
		if out := buf.String(); !strings.Contains(out, "deletion of topic chaos-rf2 asked for (assignment 0:1,2 1:2,3 2:3,1)") ||
			!strings.Contains(out, "deleted and created again") {
			t.Fatalf("recorded %s", out)
		}

		w.deleteAfter = time.Hour
		heal, err = f.inject(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := heal(t.Context()); err == nil || !strings.Contains(err.Error(), "had not deleted topic chaos-rf2 1m0s after") {
			t.Fatalf("heal of a deletion that never finishes: %v", err)
		}
		if n := len(w.calls); w.calls[n-1] != "delete chaos-rf2" {
			t.Fatalf("created a topic whose deletion never finished: %q", w.calls)
		}

		w.spread = ""
		if _, err := f.inject(t.Context(), 0); err == nil || !strings.Contains(err.Error(), "no topic without clients") {
			t.Fatalf("a run without a spread topic: %v", err)
		}
	})
}
