package checkers

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/zkchaos/zkchaos/history"
)

func TestZZDump(t *testing.T) {
	d := os.Getenv("ZZ_RUN")
	if d == "" {
		t.Skip()
	}
	h, err := history.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	from, _ := strconv.Atoi(os.Getenv("ZZ_FROM"))
	to, _ := strconv.Atoi(os.Getenv("ZZ_TO"))
	kinds := strings.Split(os.Getenv("ZZ_KINDS"), ",")
	grep := os.Getenv("ZZ_GREP")
	t0 := h.Events[0].Time
	for i := from; i < to && i < len(h.Events); i++ {
		e := &h.Events[i]
		ok := false
		for _, k := range kinds {
			if string(e.Kind) == k {
				ok = true
			}
		}
		if !ok {
			continue
		}
		b, _ := json.Marshal(e)
		if grep != "" && !strings.Contains(string(b), grep) {
			continue
		}
		s := string(b)
		if len(s) > 600 {
			s = s[:600]
		}
		t.Logf("%d +%s %s", i, rel(e.Time, t0), s)
	}
}
