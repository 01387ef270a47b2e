package history

// Topic deletion steps (TopicDeletion.Step).
const (
	// DeletionStarted: a controller began (or, after a failover or a
	// broker's return, resumed) deleting the topic: its partitions went
	// Offline then NonExistent and StopReplica went to their replicas.
	DeletionStarted = "started"
	// DeletionIneligible: a controller halted the deletion until a replica
	// comes back (Reason says which).
	DeletionIneligible = "ineligible"
	// DeletionCompleted: every replica answered its StopReplica with
	// delete, and the controller removed /brokers/topics/<t>,
	// /config/topics/<t> and /admin/delete_topics/<t>. A topic created at
	// the same name afterwards is a new incarnation: leader epochs,
	// offsets and zkVersions start again.
	DeletionCompleted = "completed"
	// PartitionDeleted: a broker accepted a StopReplica with delete for
	// one partition and removed its log.
	PartitionDeleted = "partition_deleted"
)

// TopicDeletion is one step of deleting a topic (kind topic_deletion). The
// controller logs DeletionStarted, DeletionIneligible and DeletionCompleted
// with its epoch and the topic's partitions; a broker logs
// PartitionDeleted with the one partition whose log it removed and the
// leader epoch its replica had before (-1: it hosted none).
type TopicDeletion struct {
	_ struct{}

	Topic           string  `json:"topic"`
	Step            string  `json:"step"`
	Partitions      []int32 `json:"partitions,omitempty"`
	ControllerEpoch int32   `json:"controller_epoch,omitempty"`
	LeaderEpoch     int32   `json:"leader_epoch,omitempty"`
	Reason          string  `json:"reason,omitempty"`
}
