package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// follower reads the history files that match a glob as they grow: each
// poll hands over the whole lines written since the last one, so a file is
// read once however often it is polled. The progress output and the
// scenario drivers' waits (Live.WaitEvent) both follow a run this way.
type follower struct {
	pattern string
	files   map[string]*followed
	buf     []byte
}

// followed is one file being followed.
type followed struct {
	f       *os.File
	partial []byte // an unterminated last line, completed by a later read
	source  string // the file's name without .jsonl: the source that writes it
	client  bool   // a client history (isClientFile)
}

func newFollower(pattern string) *follower {
	return &follower{pattern: pattern, files: map[string]*followed{}}
}

// poll calls line with every whole line the files gained since the last
// poll, file by file in name order, each file's lines in order. Files
// created since are picked up.
func (fl *follower) poll(line func(from *followed, b []byte)) {
	paths, _ := filepath.Glob(fl.pattern)
	if fl.buf == nil {
		fl.buf = make([]byte, 256<<10)
	}
	for _, path := range paths {
		ff := fl.files[path]
		if ff == nil {
			f, err := os.Open(path)
			if err != nil {
				continue // created but not yet readable: next poll
			}
			name := filepath.Base(path)
			ff = &followed{f: f, client: isClientFile(name), source: strings.TrimSuffix(name, ".jsonl")}
			fl.files[path] = ff
		}
		for {
			n, err := ff.f.Read(fl.buf)
			if n > 0 {
				ff.lines(fl.buf[:n], line)
			}
			if err != nil || n < len(fl.buf) {
				break
			}
		}
	}
}

// lines handles a chunk of a file: whole lines now, the rest later.
func (ff *followed) lines(chunk []byte, line func(from *followed, b []byte)) {
	data := chunk
	if len(ff.partial) > 0 {
		data = append(ff.partial, chunk...)
		ff.partial = nil
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line(ff, data[:i])
		data = data[i+1:]
	}
	if len(data) > 0 {
		ff.partial = append([]byte(nil), data...)
	}
}

func (fl *follower) close() {
	for _, ff := range fl.files {
		ff.f.Close()
	}
	fl.files = map[string]*followed{}
}

// isClientFile says whether a history file holds client operations (the
// workload's processes and the final reads): they are most of the bytes of
// a run.
func isClientFile(name string) bool {
	return strings.HasPrefix(name, "client") || name == "final.jsonl"
}
