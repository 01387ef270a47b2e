package checkers

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// Every knob of Config has exactly one flag, and every flag sets exactly one
// knob: a field added to Config without a line in RegisterFlags fails here,
// and so would a flag bound to the wrong field.
func TestEveryKnobHasOneFlag(t *testing.T) {
	notKnobs := map[string]bool{"VisualizePath": true}
	covered := map[string]string{}
	def := DefaultConfig()
	for name, value := range def.Knobs() {
		cfg := DefaultConfig()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		cfg.RegisterFlags(fs)
		other := changed(t, fs.Lookup(name).Value.Type(), value)
		if err := fs.Set(name, other); err != nil {
			t.Fatalf("--%s=%s: %v", name, other, err)
		}
		var fields []string
		dv, cv := reflect.ValueOf(def), reflect.ValueOf(cfg)
		for i := range dv.NumField() {
			f := dv.Type().Field(i)
			if f.IsExported() && !reflect.DeepEqual(dv.Field(i).Interface(), cv.Field(i).Interface()) {
				fields = append(fields, f.Name)
			}
		}
		if len(fields) != 1 {
			t.Fatalf("--%s=%s changed fields %v, want exactly one", name, other, fields)
		}
		if prev, dup := covered[fields[0]]; dup {
			t.Fatalf("--%s and --%s both set %s", prev, name, fields[0])
		}
		covered[fields[0]] = name
		if notKnobs[fields[0]] {
			t.Fatalf("--%s sets %s, which is not a knob", name, fields[0])
		}
	}
	ct := reflect.TypeOf(def)
	for i := range ct.NumField() {
		f := ct.Field(i)
		if f.IsExported() && !notKnobs[f.Name] && covered[f.Name] == "" {
			t.Errorf("Config.%s has no flag in RegisterFlags (and is not recorded in results.json)", f.Name)
		}
	}
}

// changed returns a value of a flag of type typ other than v.
func changed(t *testing.T, typ, v string) string {
	t.Helper()
	switch typ {
	case "duration":
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		return (d + time.Second).String()
	case "int":
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(n + 1)
	case "bool":
		b, err := strconv.ParseBool(v)
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatBool(!b)
	}
	t.Fatalf("flag type %s: teach changed a value of it", typ)
	return ""
}

// Knobs writes each value as its flag takes it, and setting the recorded
// values on a fresh config gives back the same knobs.
func TestKnobsRoundTrip(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OfflineGrace, cfg.MaxBadVersionRetries, cfg.StrictReads = 1500*time.Millisecond, 7, true
	k := cfg.Knobs()
	if k["offline-grace"] != "1.5s" || k["max-badversion-retries"] != "7" || k["strict-reads"] != "true" {
		t.Fatalf("knobs %v", k)
	}
	var back Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	back.RegisterFlags(fs)
	for name, v := range k {
		if err := fs.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	cfg.VisualizePath = ""
	if !reflect.DeepEqual(back, cfg) {
		t.Fatalf("round trip %+v, want %+v", back, cfg)
	}
}
