package controller

import "sync"

// queue is an unbounded FIFO with a wake-up channel. Watch callbacks and
// session callbacks must never block (go-zookeeper calls them on its own
// goroutines), and the event loop may be held at a failpoint for minutes, so
// the controller's event queue cannot be a bounded channel.
type queue[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{}
}

func newQueue[T any]() *queue[T] { return &queue[T]{wake: make(chan struct{}, 1)} }

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop returns the oldest item, if any.
func (q *queue[T]) pop() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	if len(q.items) == 0 {
		return zero, false
	}
	v := q.items[0]
	q.items[0] = zero
	q.items = q.items[1:]
	return v, true
}

// clearAndPut empties the queue, then queues v alone; it returns what the
// queue held (ControllerEventManager.clearAndPut).
func (q *queue[T]) clearAndPut(v T) []T {
	q.mu.Lock()
	out := q.items
	q.items = []T{v}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return out
}

// drain empties the queue and returns what it held.
func (q *queue[T]) drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

func (q *queue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}
