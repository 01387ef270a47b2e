package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkchaos/zkchaos/node/zkdata"
	"github.com/zkchaos/zkchaos/node/zkutil"
)

// ErrRegistrationConflict is returned by Register when /brokers/ids/<id>
// belongs to another session and the caller asked to exit on that.
var ErrRegistrationConflict = errors.New("broker id registered by another session")

// Register creates the ephemeral /brokers/ids/<id> for the current session
// and returns its czxid, the broker epoch (KIP-380). A znode that belongs to
// our own session (a create re-issued after a connection loss) is taken as
// ours (KafkaZkClient.CheckedEphemeral.getAfterNodeExists).
//
// If the znode belongs to another session (a previous process whose session
// has not expired yet): with exitOnConflict, Register returns
// ErrRegistrationConflict, as Kafka's registerBroker throws NodeExists and
// KafkaServer.startup exits, leaving the restart to a supervisor; without
// it, Register waits for the znode to go, which is what a supervisor's
// restarts amount to.
func Register(ctx context.Context, s *zkutil.Session, id int32, host string, port int32, exitOnConflict bool, logf func(string, ...any)) (int64, error) {
	return register(ctx, s.Conn, id, host, port, exitOnConflict, logf)
}

func register[C zkutil.PathConn](ctx context.Context, c C, id int32, host string, port int32, exitOnConflict bool, logf func(string, ...any)) (int64, error) {
	p := zkdata.BrokerPath(id)
	waiting := false
	for {
		data := zkdata.EncodeBroker(host, port, time.Now())
		// KafkaZkClient.CheckedEphemeral: each request is re-issued after
		// a connection loss until the session is back or expired.
		_, _, err := zkutil.UntilConnected(ctx, c, false, func(c C, _ int) (string, error) {
			return c.Create(p, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return -1, fmt.Errorf("register %s: %w", p, err)
		}
		type r struct {
			ok bool
			st *zk.Stat
		}
		v, _, serr := zkutil.UntilConnected(ctx, c, false, func(c C, _ int) (r, error) {
			ok, st, err := c.Exists(p)
			return r{ok, st}, err
		})
		if serr != nil {
			return -1, fmt.Errorf("register %s: stat: %w", p, serr)
		}
		if v.ok && v.st.EphemeralOwner == c.SessionID() {
			return v.st.Czxid, nil
		}
		owner := int64(0)
		if v.ok {
			owner = v.st.EphemeralOwner
		}
		if v.ok && exitOnConflict {
			return -1, fmt.Errorf("register %s: %w: session 0x%x, not ours (0x%x)", p, ErrRegistrationConflict, owner, c.SessionID())
		}
		if !waiting {
			waiting = true
			logf("%s exists and belongs to session 0x%x, not ours (0x%x): waiting for it to expire", p, owner, c.SessionID())
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("register %s: %w", p, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
