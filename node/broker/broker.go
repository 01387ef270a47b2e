// Package broker owns the broker half of a node: its registration in
// /brokers/ids (whose czxid is its broker epoch), the control requests it
// receives (LeaderAndIsr, StopReplica, UpdateMetadata) with Kafka's fencing
// checks in Kafka's order, its partition map (ReplicaManager) and metadata
// cache, and its side of controlled shutdown.
//
// It must not make controller decisions (controller/) and does not frame the
// wire protocol (wire/). The data plane plugs in through DataPlane.
package broker

import (
	"context"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zkchaos/zkchaos/history"
	"github.com/zkchaos/zkchaos/node/config"
	"github.com/zkchaos/zkchaos/node/eventlog"
	"github.com/zkchaos/zkchaos/node/failpoint"
	"github.com/zkchaos/zkchaos/node/wire"
)

// Special leader epochs in StopReplica (LeaderAndIsr.NoEpoch, EpochDuringDelete).
const (
	NoEpoch           int32 = -1
	EpochDuringDelete int32 = -2
)

// Broker is the control-plane state of one broker process.
type Broker struct {
	ID   int32
	Bugs config.Bugs
	Log  *eventlog.Log
	Data DataPlane

	Replicas *ReplicaManager
	Metadata *MetadataCache
	// FP holds the broker's failpoints (broker-after-register); nil: none.
	FP *failpoint.Registry

	mu              sync.Mutex
	brokerEpoch     int64 // czxid of our live registration; -1 before
	controllerEpoch int32 // highest controller epoch seen; only rises
	// servedSinceRegister is false from a registration until the first
	// control request after it is handled (broker-after-register).
	servedSinceRegister bool
	// registered is closed at the first registration.
	registered chan struct{}
}

// New returns a broker with no registration yet.
func New(id int32, bugs config.Bugs, log *eventlog.Log) *Broker {
	return &Broker{ID: id, Bugs: bugs, Log: log, Data: NoDataPlane{},
		Replicas: newReplicaManager(), Metadata: newMetadataCache(), brokerEpoch: -1,
		registered: make(chan struct{})}
}

// AwaitRegistration blocks until the broker has registered once, or ctx
// ends. Kafka starts serving requests only after registerBroker (KafkaServer
// starts its socket server's processors last), so a control request that
// reaches a process still starting up waits, and is then judged against that
// process's broker epoch. Without the wait a request queued for the previous
// process would be accepted by a process whose own epoch is still unknown.
func (b *Broker) AwaitRegistration(ctx context.Context) error {
	select {
	case <-b.registered:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker %d not registered yet: %w", b.ID, ctx.Err())
	}
}

// Epoch returns the broker epoch (czxid of the live registration), -1 if not
// registered.
func (b *Broker) Epoch() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.brokerEpoch
}

// SetEpoch records a new registration's czxid.
func (b *Broker) SetEpoch(czxid int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.brokerEpoch = czxid
	b.servedSinceRegister = false
	select {
	case <-b.registered:
	default:
		close(b.registered)
	}
}

// afterRegister evaluates broker-after-register before the first control
// request of a registration is handled. An injected error is answered as
// UNKNOWN_SERVER_ERROR without applying the request, as a broker that failed
// it would; the controller retries nothing for it, as in Kafka.
func (b *Broker) afterRegister() int16 {
	b.mu.Lock()
	first := !b.servedSinceRegister && b.brokerEpoch > 0
	b.servedSinceRegister = true
	b.mu.Unlock()
	if !first {
		return 0
	}
	if err := b.FP.Eval(context.Background(), failpoint.BrokerAfterRegister); err != nil {
		b.Log.Printf("%v: first control request after registration refused", err)
		return kerr.UnknownServerError.Code
	}
	return 0
}

// KnownControllerEpoch is the highest controller epoch the broker has seen.
func (b *Broker) KnownControllerEpoch() int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.controllerEpoch
}

// checkRequest applies the whole-request checks in Kafka's order and, if the
// request passes, raises the known controller epoch. It returns the error
// code (0: accepted) and the state before the request, for the event log.
// Caller holds b.mu.
func (b *Broker) checkRequest(controllerEpoch int32, brokerEpoch int64) (code int16, known int32, own int64) {
	known, own = b.controllerEpoch, b.brokerEpoch
	// 1. KafkaApis.isBrokerEpochStale: -1 means "not carried" (old request
	// versions); a larger epoch than ours is fine (the controller may have
	// seen our new registration before we did).
	if !b.Bugs.On(config.BugKafka7235) && brokerEpoch != -1 && brokerEpoch < own {
		return kerr.StaleBrokerEpoch.Code, known, own
	}
	// 2. ReplicaManager: an older controller epoch than the highest seen.
	if !b.Bugs.On(config.BugKafka532) && controllerEpoch < known {
		return kerr.StaleControllerEpoch.Code, known, own
	}
	if controllerEpoch > b.controllerEpoch {
		b.controllerEpoch = controllerEpoch
	}
	return 0, known, own
}

// admit applies checkRequest to a control request of api and returns the
// code with the request's event, its whole-request fields filled in (the
// handler adds the partitions, control the verdict). Caller holds b.mu.
func (b *Broker) admit(hdr wire.RequestHeader, api string, controllerID, controllerEpoch int32, brokerEpoch int64) (int16, history.Control) {
	code, known, own := b.checkRequest(controllerEpoch, brokerEpoch)
	return code, history.Control{
		API: api, APIVersion: hdr.APIVersion, CorrelationID: hdr.CorrelationID,
		ControllerID: controllerID, ControllerEpoch: controllerEpoch, BrokerEpoch: brokerEpoch,
		KnownControllerEpoch: known, OwnBrokerEpoch: own,
	}
}

// carried is the broker epoch a control request of version v carries: its
// field from version since on, -1 ("not carried") before.
func carried(epoch int64, v, since int16) int64 {
	if v < since {
		return -1
	}
	return epoch
}

// HandleLeaderAndIsr serves a LeaderAndIsr request (ReplicaManager.becomeLeaderOrFollower).
func (b *Broker) HandleLeaderAndIsr(hdr wire.RequestHeader, req *kmsg.LeaderAndISRRequest) *kmsg.LeaderAndISRResponse {
	resp := kmsg.NewPtrLeaderAndISRResponse()
	resp.SetVersion(req.Version)
	b.control(hdr, history.APILeaderAndIsr, req.ControllerID, req.ControllerEpoch, carried(req.BrokerEpoch, req.Version, 2), &resp.ErrorCode,
		func(code int16, ev *history.Control) (roles []history.Role) {
			states := req.PartitionStates
			if req.Version >= 2 {
				states = nil
				for _, t := range req.TopicStates {
					for _, p := range t.PartitionStates {
						p.Topic = t.Topic
						states = append(states, p)
					}
				}
			}
			liveLeaders := map[int32]string{}
			for _, l := range req.LiveLeaders {
				liveLeaders[l.BrokerID] = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
			}
			perPartition := make([]int16, len(states))
			notApplied := make([]bool, len(states))
			if code != 0 {
				for i := range perPartition {
					perPartition[i] = code
				}
			} else {
				for i, s := range states {
					tp := history.TP(s.Topic, s.Partition)
					cur := b.Replicas.leaderEpoch(tp)
					switch {
					case s.LeaderEpoch <= cur:
						// Not newer than what we have: a stale or duplicate decision.
						perPartition[i] = kerr.StaleControllerEpoch.Code
					case !slices.Contains(s.Replicas, b.ID):
						perPartition[i] = kerr.UnknownTopicOrPartition.Code
					case s.Leader != b.ID && !b.leaderAlive(s.Leader):
						// ReplicaManager.makeFollowers changes a partition's
						// state only when the new leader is among the metadata
						// cache's live brokers (never -1): otherwise it only
						// creates the log and answers NONE, and the replica
						// keeps its leader epoch, role and fetcher.
						notApplied[i] = true
						b.Log.Printf("LeaderAndIsr %s: cannot become follower since the new leader %d is unavailable", tp, s.Leader)
						if lc, ok := b.Data.(LogCreator); ok {
							if err := lc.CreateLog(tp); err != nil {
								b.Log.Printf("LeaderAndIsr %s: create log: %v", tp, err)
								perPartition[i] = kerr.KafkaStorageError.Code
							}
						}
					default:
						p := Partition{Topic: s.Topic, Partition: s.Partition, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
							ISR: slices.Clone(s.ISR), Replicas: slices.Clone(s.Replicas), ZkVersion: s.ZKVersion, ControllerEpoch: s.ControllerEpoch,
							LeaderAddr: liveLeaders[s.Leader]}
						var err error
						if s.Leader == b.ID {
							p.Role = history.RoleLeader
							err = b.Data.BecomeLeader(p)
						} else {
							p.Role = history.RoleFollower
							err = b.Data.BecomeFollower(p)
						}
						if err != nil {
							b.Log.Printf("LeaderAndIsr %s: data plane: %v", tp, err)
							perPartition[i] = kerr.UnknownServerError.Code
							continue
						}
						b.Replicas.mu.Lock()
						b.Replicas.partitions[tp] = &p
						b.Replicas.mu.Unlock()
						roles = append(roles, history.Role{Topic: p.Topic, Partition: p.Partition, Role: p.Role, Leader: p.Leader,
							LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, ControllerEpoch: req.ControllerEpoch})
					}
				}
				b.Replicas.mu.Lock()
				first := !b.Replicas.hwStarted
				b.Replicas.hwStarted = true
				b.Replicas.mu.Unlock()
				if first {
					b.Data.StartHWCheckpoint()
				}
			}
			for i, s := range states {
				resp.Partitions = append(resp.Partitions, kmsg.LeaderAndISRResponseTopicPartition{Topic: s.Topic, Partition: s.Partition, ErrorCode: perPartition[i]})
				ev.Partitions = append(ev.Partitions, history.ControlPartition{Topic: s.Topic, Partition: s.Partition, Leader: s.Leader,
					LeaderEpoch: s.LeaderEpoch, ISR: s.ISR, Replicas: s.Replicas, ZkVersion: s.ZKVersion, IsNew: s.IsNew, ErrorCode: perPartition[i],
					NotApplied: notApplied[i] && perPartition[i] == 0})
			}
			return roles
		})
	return resp
}

// leaderAlive reports whether id is a live broker in the metadata cache, as
// makeFollowers' metadataCache.getAliveBrokers.find(_.id == leader) asks.
func (b *Broker) leaderAlive(id int32) bool {
	if id < 0 {
		return false
	}
	_, ok := b.Metadata.Broker(id)
	return ok
}

// control serves what the three control requests share. broker-after-register
// comes first: its refusal answers the request with that code alone, nothing
// applied or logged. Then, under b.mu, the whole-request checks give the
// request's error code, apply answers each partition (applying it when the
// code is 0), and the control event is logged, before the role changes
// apply returns: a role change follows the request that made it.
func (b *Broker) control(hdr wire.RequestHeader, api string, controllerID, controllerEpoch int32, brokerEpoch int64,
	errorCode *int16, apply func(code int16, ev *history.Control) (roles []history.Role)) {
	if *errorCode = b.afterRegister(); *errorCode != 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	code, ev := b.admit(hdr, api, controllerID, controllerEpoch, brokerEpoch)
	*errorCode = code
	roles := apply(code, &ev)
	ev.ErrorCode = code
	ev.Verdict = history.VerdictAccepted
	if code != 0 {
		ev.Verdict = history.VerdictRejected
	}
	b.Log.Emit(history.Event{Kind: history.KindControlRequest, Control: &ev})
	for _, r := range roles {
		b.Log.Emit(history.Event{Kind: history.KindRoleChange, Role: &r})
	}
}

// HandleStopReplica serves a StopReplica request (ReplicaManager.stopReplicas).
func (b *Broker) HandleStopReplica(hdr wire.RequestHeader, req *kmsg.StopReplicaRequest) *kmsg.StopReplicaResponse {
	resp := kmsg.NewPtrStopReplicaResponse()
	resp.SetVersion(req.Version)
	var deleted []history.TopicDeletion
	defer func() {
		// After the request's control_request and role changes: each
		// partition whose log this request removed.
		for i := range deleted {
			b.Log.Emit(history.Event{Kind: history.KindTopicDeletion, Deletion: &deleted[i]})
		}
	}()
	b.control(hdr, history.APIStopReplica, req.ControllerID, req.ControllerEpoch, carried(req.BrokerEpoch, req.Version, 1), &resp.ErrorCode,
		func(code int16, ev *history.Control) (stopped []history.Role) {
			ev.DeletePartition = req.DeletePartitions
			type part struct {
				topic       string
				partition   int32
				leaderEpoch int32
				delete      bool
			}
			var parts []part
			for _, t := range req.Topics {
				switch {
				case req.Version == 0:
					parts = append(parts, part{t.Topic, t.Partition, NoEpoch, req.DeletePartitions})
				case req.Version <= 2:
					for _, p := range t.Partitions {
						parts = append(parts, part{t.Topic, p, NoEpoch, req.DeletePartitions})
					}
				default:
					for _, p := range t.PartitionStates {
						parts = append(parts, part{t.Topic, p.Partition, p.LeaderEpoch, p.Delete})
					}
				}
			}
			for _, p := range parts {
				tp := history.TP(p.topic, p.partition)
				pc := code
				if code == 0 {
					// ReplicaManager.stopReplicas (KIP-570, Kafka 2.6 to 3.4):
					// NoEpoch and EpochDuringDelete bypass the check, a
					// larger leader epoch stops the replica, an equal or
					// smaller one is FENCED_LEADER_EPOCH. Kafka 3.5
					// (KAFKA-13972) accepts an equal epoch too; the node
					// follows 2.x. A partition not hosted has no epoch (-1),
					// so any request stops it (HostedPartition.None).
					cur := b.Replicas.leaderEpoch(tp)
					if p.leaderEpoch == NoEpoch || p.leaderEpoch == EpochDuringDelete || p.leaderEpoch > cur {
						if err := b.Data.StopReplica(tp, p.delete); err != nil {
							b.Log.Printf("StopReplica %s: data plane: %v", tp, err)
							pc = kerr.UnknownServerError.Code
						} else {
							b.Replicas.mu.Lock()
							old, hosted := b.Replicas.partitions[tp]
							// A leader told to stop without delete keeps
							// leading at its epoch, as Kafka 2.6.3's does
							// (ReplicaManager.stopReplicas only removes
							// fetchers): no role change to log.
							keepsLeading := !p.delete && hosted && old.Role == history.RoleLeader
							if p.delete {
								delete(b.Replicas.partitions, tp)
							} else if hosted && !keepsLeading {
								old.Role = history.RoleStopped
							}
							b.Replicas.mu.Unlock()
							le := p.leaderEpoch
							if hosted && le < 0 {
								le = old.LeaderEpoch
							}
							if p.delete {
								prev := NoEpoch
								if hosted {
									prev = old.LeaderEpoch
								}
								deleted = append(deleted, history.TopicDeletion{Topic: p.topic, Step: history.PartitionDeleted,
									Partitions: []int32{p.partition}, ControllerEpoch: req.ControllerEpoch, LeaderEpoch: prev})
							}
							if !keepsLeading {
								// Last partition first, the order these have always been logged in.
								stopped = slices.Insert(stopped, 0, history.Role{Topic: p.topic, Partition: p.partition,
									Role: history.RoleStopped, Leader: -1, LeaderEpoch: le, ControllerEpoch: req.ControllerEpoch})
							}
						}
					} else {
						pc = kerr.FencedLeaderEpoch.Code
					}
				}
				resp.Partitions = append(resp.Partitions, kmsg.StopReplicaResponsePartition{Topic: p.topic, Partition: p.partition, ErrorCode: pc})
				ev.Partitions = append(ev.Partitions, history.ControlPartition{Topic: p.topic, Partition: p.partition, Leader: -1,
					LeaderEpoch: p.leaderEpoch, ErrorCode: pc})
			}
			return stopped
		})
	return resp
}

// HandleUpdateMetadata serves UpdateMetadata (ReplicaManager.maybeUpdateMetadataCache).
func (b *Broker) HandleUpdateMetadata(hdr wire.RequestHeader, req *kmsg.UpdateMetadataRequest) *kmsg.UpdateMetadataResponse {
	resp := kmsg.NewPtrUpdateMetadataResponse()
	resp.SetVersion(req.Version)
	b.control(hdr, history.APIUpdateMetadata, req.ControllerID, req.ControllerEpoch, carried(req.BrokerEpoch, req.Version, 5), &resp.ErrorCode,
		func(code int16, ev *history.Control) []history.Role {
			// The partition states as received, as the controller logs
			// them sent: the pair is matched by what it says, and the
			// broker's metadata cache is what clients are told.
			for _, t := range req.TopicStates {
				for _, p := range t.PartitionStates {
					ev.Partitions = append(ev.Partitions, history.ControlPartition{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader,
						LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, Replicas: p.Replicas, ZkVersion: p.ZKVersion})
				}
			}
			if code == 0 {
				b.Metadata.update(req)
			}
			return nil
		})
	return resp
}

// String describes the broker for logs.
func (b *Broker) String() string {
	return fmt.Sprintf("broker %d (epoch %d, known controller epoch %d)", b.ID, b.Epoch(), b.KnownControllerEpoch())
}
