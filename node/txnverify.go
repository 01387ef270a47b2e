package node

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/dataplane"
	"github.com/zkchaos/zkchaos/node/txn"
)

// verifyTimeout bounds one verification round trip (the
// AddPartitionsToTxnManager's request timeout).
const verifyTimeout = 10 * time.Second

// verify is the node's dataplane.TxnVerifier, Kafka 3.6's
// AddPartitionsToTxnManager for one partition: the transactional id's
// coordinator is the leader of its __transaction_state partition in the
// metadata cache; this broker's own coordinator is asked directly, another
// broker's with AddPartitionsToTxn v4 VerifyOnly. Kafka batches the
// partitions of a request per coordinator; here each partition is one
// question.
func (t *txns) verify(ctx context.Context, id string, pid int64, epoch int16, tp history.TopicPartition) int16 {
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	ttp := txn.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	brokers, parts := t.n.broker.Metadata.Snapshot()
	ps, ok := parts[history.TP(dataplane.TransactionStateTopic, t.coord.PartitionFor(id))]
	if !ok || ps.Leader < 0 {
		return kerr.CoordinatorNotAvailable.Code
	}
	var code int16
	if ps.Leader == t.n.cfg.BrokerID {
		code = t.coord.VerifyPartitions(id, pid, epoch, []txn.TopicPartition{ttp})[ttp]
	} else {
		b, live := brokers[ps.Leader]
		if !live {
			return kerr.CoordinatorNotAvailable.Code
		}
		var err error
		code, err = t.verifyRemote(ctx, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), id, pid, epoch, ttp)
		if err != nil {
			t.n.log.Printf("transaction verification for %s with broker %d: %v", tp, ps.Leader, err)
			return kerr.NetworkException.Code
		}
	}
	if code == kerr.ProducerFenced.Code {
		// The client is told as Kafka 3.6's leader tells it.
		code = kerr.InvalidProducerEpoch.Code
	}
	return code
}

// verifyRemote sends one AddPartitionsToTxn v4 VerifyOnly, over a
// connection of its own per address (not the markers', which a marker
// round may hold for a while).
func (t *txns) verifyRemote(ctx context.Context, addr, id string, pid int64, epoch int16, tp txn.TopicPartition) (int16, error) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(txn.VerifyRoute)
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	cl := t.client("verify "+addr, addr, "txn-verify")
	r, err := cl.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := r.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, nil
	}
	for _, rt := range resp.Transactions {
		for _, ot := range rt.Topics {
			for _, op := range ot.Partitions {
				if rt.TransactionalID == id && ot.Topic == tp.Topic && op.Partition == tp.Partition {
					return op.ErrorCode, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("AddPartitionsToTxn v%d answer without %s", req.Version, tp)
}
