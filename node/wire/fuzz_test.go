package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzParseRequest: no frame may panic the decoder or the response encoder.
// Seeds are valid control requests of several versions; run with
// go test -fuzz=FuzzParseRequest ./node/wire (new crashers land in
// testdata/fuzz/FuzzParseRequest and stay as regression seeds).
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte{0, 6, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3}) // ControlledShutdown v0: no client id
	for _, r := range []kmsg.Request{
		func() kmsg.Request { r := kmsg.NewPtrLeaderAndISRRequest(); r.SetVersion(4); return r }(),
		func() kmsg.Request { r := kmsg.NewPtrLeaderAndISRRequest(); r.SetVersion(1); return r }(),
		func() kmsg.Request { r := kmsg.NewPtrStopReplicaRequest(); r.SetVersion(3); return r }(),
		func() kmsg.Request { r := kmsg.NewPtrUpdateMetadataRequest(); r.SetVersion(6); return r }(),
		func() kmsg.Request { r := kmsg.NewPtrControlledShutdownRequest(); r.SetVersion(3); return r }(),
		func() kmsg.Request { r := kmsg.NewPtrApiVersionsRequest(); r.SetVersion(3); return r }(),
	} {
		f.Add(kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed")).AppendRequest(nil, r, 1)[4:])
	}
	supported := func(key, v int16) bool { return key >= 4 && key <= 7 || key == 18 }
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := ParseRequest(frame, supported)
		if err != nil {
			return
		}
		resp := req.Body.ResponseKind()
		resp.SetVersion(req.Header.APIVersion)
		AppendResponse(nil, resp, req.Header.CorrelationID)
		// Re-encoding what we decoded must decode again.
		again := req.Body.AppendTo(nil)
		fresh := kmsg.RequestForKey(req.Header.APIKey)
		fresh.SetVersion(req.Header.APIVersion)
		if err := fresh.ReadFrom(again); err != nil {
			t.Fatalf("re-encoded %s v%d does not decode: %v", kmsg.NameForKey(req.Header.APIKey), req.Header.APIVersion, err)
		}
	})
}
