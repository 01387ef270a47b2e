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

// Register creates the ephemeral /brokers/ids/<id> for the current session
// and returns its czxid, the broker epoch (KIP-380). If the znode exists and
// belongs to another session (a previous process whose session has not
// expired yet), it waits for it to go, as a restarted broker must; Kafka
// fails start-up instead and relies on being restarted, which amounts to the
// same wait. A znode that belongs to our own session (a create retried after
// a connection loss) is taken as ours (checkedEphemeralCreate).
func Register(ctx context.Context, s *zkutil.Session, id int32, host string, port int32, logf func(string, ...any)) (int64, error) {
	p := zkdata.BrokerPath(id)
	waiting := false
	for {
		data := zkdata.EncodeBroker(host, port, time.Now())
		// KafkaZkClient.CheckedEphemeral: each request is re-issued after
		// a connection loss until the session is back or expired.
		_, _, err := zkutil.UntilConnected(ctx, s.Conn, false, func(c *zk.Conn, _ int) (string, error) {
			return c.Create(p, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return -1, fmt.Errorf("register %s: %w", p, err)
		}
		type r struct {
			ok bool
			st *zk.Stat
		}
		v, _, serr := zkutil.UntilConnected(ctx, s.Conn, false, func(c *zk.Conn, _ int) (r, error) {
			ok, st, err := c.Exists(p)
			return r{ok, st}, err
		})
		if serr != nil {
			return -1, fmt.Errorf("register %s: stat: %w", p, serr)
		}
		if v.ok && v.st.EphemeralOwner == s.Conn.SessionID() {
			return v.st.Czxid, nil
		}
		if !waiting {
			waiting = true
			owner := int64(0)
			if v.ok {
				owner = v.st.EphemeralOwner
			}
			logf("%s exists and belongs to session 0x%x, not ours (0x%x): waiting for it to expire", p, owner, s.Conn.SessionID())
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("register %s: %w", p, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
