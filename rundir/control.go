package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ControlFile is RUN_DIR/control.json, written by `chaos up` while its
// cluster runs and removed when it stops: where `chaos fault` reaches it.
const ControlFile = "control.json"

// Control is RUN_DIR/control.json.
type Control struct {
	// Addr is the control listener, host:port on 127.0.0.1.
	Addr string `json:"addr"`
	// PID is the `chaos up` process, for the person reading the file.
	PID int `json:"pid"`
	// Bootstrap lists the brokers' Kafka listeners.
	Bootstrap []string `json:"bootstrap"`
	// ZooKeeper lists the ensemble's client addresses: ZooKeeper-era tools
	// (kafka-topics.sh --zookeeper) create topics through it.
	ZooKeeper []string `json:"zookeeper"`
	Topic     string   `json:"topic"`
}

// WriteControl stores c as RUN_DIR/control.json.
func WriteControl(runDir string, c Control) error {
	return writeJSONAtomic(filepath.Join(runDir, ControlFile), c)
}

// RemoveControl deletes RUN_DIR/control.json; a missing file is fine.
func RemoveControl(runDir string) error {
	err := os.Remove(filepath.Join(runDir, ControlFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ReadControl loads RUN_DIR/control.json. A missing file means no `chaos
// up` is running on that directory, and the error says so.
func ReadControl(runDir string) (Control, error) {
	p := filepath.Join(runDir, ControlFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Control{}, fmt.Errorf("%s: no `chaos up` is running on this run directory", p)
	}
	if err != nil {
		return Control{}, fmt.Errorf("read %s: %w", p, err)
	}
	var c Control
	if err := json.Unmarshal(b, &c); err != nil {
		return Control{}, fmt.Errorf("%s: %w", p, err)
	}
	if c.Addr == "" {
		return Control{}, fmt.Errorf("%s: no addr", p)
	}
	return c, nil
}
