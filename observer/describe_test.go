package observer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// describe keeps the raw data of every znode and decodes only what parses:
// a malformed znode is recorded as it is, without a made-up state.
func TestDescribe(t *testing.T) {
	tests := []struct {
		path, data string
		want       string // the Watch as JSON, without path, type, data and stat
	}{
		{"/controller", `{"version":1,"brokerid":2,"timestamp":"1"}`, `{"controller_id":2}`},
		{"/controller", `{"version":1}`, `{}`},
		{"/controller_epoch", "7", `{"controller_epoch":7}`},
		{"/controller_epoch", "seven", `{}`},
		{"/brokers/topics/t/partitions/3/state", `{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":4,"isr":[2,1]}`,
			`{"state":{"topic":"t","partition":3,"leader":2,"leader_epoch":4,"controller_epoch":1,"isr":[2,1]}}`},
		{"/brokers/topics/t/partitions/3/state", `{"leader":2,`, `{}`},
		{"/brokers/topics/t/partitions/x/state", `{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":4,"isr":[2,1]}`, `{}`},
	}
	for _, tt := range tests {
		w := describe(tt.path, []byte(tt.data), &zk.Stat{Mzxid: 9})
		if w.Data != tt.data || w.Mzxid != 9 || w.Path != tt.path {
			t.Errorf("%s %s: raw %q, mzxid %d, path %q", tt.path, tt.data, w.Data, w.Mzxid, w.Path)
		}
		w.Path, w.Type, w.Data, w.Czxid, w.Mzxid, w.Version = "", "", "", 0, 0, 0
		b, err := json.Marshal(w)
		got := strings.Replace(strings.Replace(string(b), `"path":"","type":""`, "", 1), "{,", "{", 1)
		if err != nil || got != tt.want {
			t.Errorf("%s %s: decoded %s (%v), want %s", tt.path, tt.data, got, err, tt.want)
		}
	}
}
