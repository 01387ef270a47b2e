package compat

// This file holds the suite's own one-request Kafka client and the znodes it
// reads and writes, so that the suite reaches the nodes through the Kafka
// protocol and ZooKeeper only, as any outside client does, and never through
// the node program's Go packages.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ZooKeeper paths of ZooKeeper-mode Kafka.
const (
	controllerPath      = "/controller"
	controllerEpochPath = "/controller_epoch"
)

func topicPath(topic string) string { return "/brokers/topics/" + topic }

// encodeTopic is /brokers/topics/<t>: the replica assignment per partition.
func encodeTopic(assign map[int32][]int32) []byte {
	parts := make(map[string][]int32, len(assign))
	for p, rs := range assign {
		parts[strconv.Itoa(int(p))] = rs
	}
	b, _ := json.Marshal(struct {
		Version    int                `json:"version"`
		Partitions map[string][]int32 `json:"partitions"`
	}{1, parts})
	return b
}

// decodeController reads /controller's broker id.
func decodeController(b []byte) (int32, error) {
	var c struct {
		BrokerID *int32 `json:"brokerid"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.BrokerID == nil {
		return 0, fmt.Errorf("/controller %q: no brokerid (%v)", b, err)
	}
	return *c.BrokerID, nil
}

// metadataRequest is the suite's Metadata request for one topic, at a
// version every client it stands beside speaks.
func metadataRequest(topic string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(7)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	return req
}

// kafkaRequest sends req to the broker at addr on a connection of its own
// and returns its response: one request, exactly to that broker, which a
// client library's routing would not guarantee. Only non-flexible request
// versions are used here, so the response header is the correlation id
// alone. Every exchange is bounded by within, as a hung broker must fail
// the test rather than stall it.
func kafkaRequest(ctx context.Context, within time.Duration, addr string, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if req.IsFlexible() {
		return nil, fmt.Errorf("%s v%d: flexible versions are not used by the suite", kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	const corr = 1
	msg := kmsg.NewRequestFormatter(kmsg.FormatterClientID("compat")).AppendRequest(nil, req, corr)
	if _, err := conn.Write(msg); err != nil {
		return nil, fmt.Errorf("%s to %s: %w", kmsg.NameForKey(req.Key()), addr, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, fmt.Errorf("%s response from %s: %w", kmsg.NameForKey(req.Key()), addr, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, fmt.Errorf("%s response from %s: %w", kmsg.NameForKey(req.Key()), addr, err)
	}
	if len(body) < 4 || binary.BigEndian.Uint32(body) != corr {
		return nil, fmt.Errorf("%s response from %s: bad correlation id", kmsg.NameForKey(req.Key()), addr)
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, fmt.Errorf("%s response from %s: %w", kmsg.NameForKey(req.Key()), addr, err)
	}
	return resp, nil
}
