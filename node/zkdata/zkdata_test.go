package zkdata

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEncodingsMatchKafka(t *testing.T) {
	now := time.UnixMilli(1700000000123)
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"controller", EncodeController(3, now), `{"version":1,"brokerid":3,"timestamp":"1700000000123"}`},
		{"controller_epoch", EncodeControllerEpoch(7), `7`},
		{"broker", EncodeBroker("10.0.0.2", 9092, now), `{"version":4,"host":"10.0.0.2","port":9092,"jmx_port":-1,"timestamp":"1700000000123","endpoints":["PLAINTEXT://10.0.0.2:9092"]}`},
		{"topic", EncodeTopic(map[int32][]int32{0: {1, 2, 3}}), `{"version":2,"partitions":{"0":[1,2,3]}}`},
		{"state", EncodePartitionState(PartitionState{Leader: 2, LeaderEpoch: 5, ControllerEpoch: 3, ISR: []int32{2, 1}}), `{"version":1,"leader":2,"leader_epoch":5,"controller_epoch":3,"isr":[2,1]}`},
		{"isr change", EncodeTopicPartitions([]TopicPartition{{"t", 1}}), `{"version":1,"partitions":[{"topic":"t","partition":1}]}`},
		{"producer id block", EncodeProducerIDBlock(2, 1000, 1999), `{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
	}
}

func TestDecodeRoundTripsAndRejectsBadInput(t *testing.T) {
	if id, err := DecodeController(EncodeController(4, time.Now())); err != nil || id != 4 {
		t.Fatalf("controller: %d %v", id, err)
	}
	if id, err := DecodeController([]byte("2")); err != nil || id != 2 {
		t.Fatalf("0.8-style controller: %d %v", id, err)
	}
	r, err := DecodeBroker(1, EncodeBroker("h", 19092, time.Now()))
	if err != nil || r.Host != "h" || r.Port != 19092 {
		t.Fatalf("broker: %+v %v", r, err)
	}
	as, err := DecodeTopic("t", EncodeTopic(map[int32][]int32{0: {1, 2}, 1: {2, 1}}))
	if err != nil || !slices.Equal(as[1], []int32{2, 1}) {
		t.Fatalf("topic: %v %v", as, err)
	}
	st, err := DecodePartitionState("t", 0, EncodePartitionState(PartitionState{Leader: 1, LeaderEpoch: 2, ControllerEpoch: 3, ISR: []int32{1}}))
	if err != nil || st.Leader != 1 || st.LeaderEpoch != 2 || st.ControllerEpoch != 3 {
		t.Fatalf("state: %+v %v", st, err)
	}
	if end, err := DecodeProducerIDBlockEnd(EncodeProducerIDBlock(1, 0, 999)); err != nil || end != 999 {
		t.Fatalf("producer id block: %d %v", end, err)
	}

	bad := []struct {
		name string
		err  error
	}{
		{"controller garbage", func() error { _, err := DecodeController([]byte("{x")); return err }()},
		{"controller empty", func() error { _, err := DecodeController(nil); return err }()},
		{"controller negative", func() error { _, err := DecodeController([]byte(`{"brokerid":-3}`)); return err }()},
		{"epoch text", func() error { _, err := DecodeControllerEpoch([]byte("abc")); return err }()},
		{"epoch negative", func() error { _, err := DecodeControllerEpoch([]byte("-1")); return err }()},
		{"broker no endpoint", func() error { _, err := DecodeBroker(1, []byte(`{"version":4}`)); return err }()},
		{"broker bad endpoint", func() error {
			_, err := DecodeBroker(1, []byte(`{"endpoints":["PLAINTEXT://nohostport"]}`))
			return err
		}()},
		{"topic bad partition", func() error { _, err := DecodeTopic("t", []byte(`{"partitions":{"x":[1]}}`)); return err }()},
		{"topic no replicas", func() error { _, err := DecodeTopic("t", []byte(`{"partitions":{"0":[]}}`)); return err }()},
		{"state empty isr", func() error {
			_, err := DecodePartitionState("t", 0, []byte(`{"leader":1,"leader_epoch":0,"isr":[]}`))
			return err
		}()},
		{"state truncated", func() error { _, err := DecodePartitionState("t", 0, []byte(`{"leader":`)); return err }()},
		{"producer id block garbage", func() error { _, err := DecodeProducerIDBlockEnd([]byte(`{"block_end":`)); return err }()},
		{"producer id block bad end", func() error { _, err := DecodeProducerIDBlockEnd([]byte(`{"block_end":"x"}`)); return err }()},
		{"reassignment bad entry", func() error {
			_, err := DecodeReassignment([]byte(`{"partitions":[{"topic":"","partition":0,"replicas":[1]}]}`))
			return err
		}()},
	}
	for _, b := range bad {
		if b.err == nil {
			t.Errorf("%s: want an error", b.name)
		} else if !strings.Contains(b.err.Error(), "/") {
			t.Errorf("%s: error %q does not name the znode", b.name, b.err)
		}
	}
}

func TestPaths(t *testing.T) {
	if got := PartitionStatePath("t", 3); got != "/brokers/topics/t/partitions/3/state" {
		t.Fatal(got)
	}
	if got := BrokerPath(12); got != "/brokers/ids/12" {
		t.Fatal(got)
	}
}
