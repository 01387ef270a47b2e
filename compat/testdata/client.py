"""kafka-python side of the compatibility suite: one action per run, one JSON
document on stdout, client logs on stderr. Uses only what python3-kafka
2.0.2 (Debian) offers; every action but group_consume reads without a
consumer group (group_id=None)."""
import json
import logging
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

seen_errors = []


class Collect(logging.Handler):
    """Remembers the broker error names the client logged while retrying."""

    def emit(self, record):
        msg = record.getMessage()
        for name in ("NotLeaderForPartitionError", "LeaderNotAvailableError", "RequestTimedOutError",
                     "UnknownTopicOrPartitionError", "KafkaTimeoutError", "OffsetNotAvailableError"):
            if name in msg:
                seen_errors.append(name)


logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
logging.getLogger("kafka").addHandler(Collect())


def main():
    args = dict(a.split("=", 1) for a in sys.argv[2:])
    action, boot, topic = sys.argv[1], args["bootstrap"], args.get("topic", "")
    out = {}
    if action == "metadata":
        c = KafkaConsumer(bootstrap_servers=boot, group_id=None)
        out["partitions"] = sorted(c.partitions_for_topic(topic) or [])
        out["brokers"] = sorted(b.nodeId for b in c._client.cluster.brokers())
        out["api_version"] = list(c.config["api_version"])
        c.close()
    elif action == "produce":
        acks = args.get("acks", "all")
        acks = acks if acks == "all" else int(acks)
        p = KafkaProducer(bootstrap_servers=boot, acks=acks, retries=int(args.get("retries", "10")),
                          retry_backoff_ms=200, request_timeout_ms=10000, max_in_flight_requests_per_connection=1,
                          linger_ms=int(args.get("linger", "0")))
        n, prefix, gap = int(args["count"]), args.get("prefix", "v"), float(args.get("gap", "0"))
        futs = []
        for i in range(n):
            futs.append((i, p.send(topic, value=("%s-%d" % (prefix, i)).encode(), partition=0)))
            if gap:
                time.sleep(gap)
        acked, failed = [], []
        for i, f in futs:
            try:
                md = f.get(timeout=60)
                acked.append([i, md.offset])
            except KafkaError as e:
                failed.append([i, type(e).__name__])
        p.close()
        out = {"acked": acked, "failed": failed}
    elif action == "consume":
        tp = TopicPartition(topic, 0)
        c = KafkaConsumer(bootstrap_servers=boot, group_id=None, enable_auto_commit=False,
                          consumer_timeout_ms=int(args.get("idle_ms", "3000")))
        c.assign([tp])
        c.seek(tp, int(args.get("offset", "0")))
        want = int(args.get("count", "-1"))
        recs = []
        for m in c:
            recs.append([m.offset, m.value.decode()])
            if 0 <= want <= len(recs):
                break
        c.close()
        out = {"records": recs}
    elif action == "group_consume":
        # A group member: coordinator look-up, JoinGroup/SyncGroup, offsets
        # from the group (none yet: earliest), auto-commits, LeaveGroup.
        c = KafkaConsumer(topic, bootstrap_servers=boot, group_id=args["group"], auto_offset_reset="earliest",
                          enable_auto_commit=True, auto_commit_interval_ms=200,
                          consumer_timeout_ms=int(args.get("idle_ms", "30000")))
        want = int(args.get("count", "-1"))
        recs = []
        for m in c:
            recs.append([m.partition, m.value.decode()])
            if 0 <= want <= len(recs):
                break
        c.commit()
        committed = {}
        for tp in c.assignment():
            committed[str(tp.partition)] = c.committed(tp)
        c.close()
        out = {"records": recs, "committed": committed}
    elif action == "offsets":
        tp = TopicPartition(topic, 0)
        c = KafkaConsumer(bootstrap_servers=boot, group_id=None)
        out = {"earliest": c.beginning_offsets([tp])[tp], "latest": c.end_offsets([tp])[tp]}
        c.close()
    else:
        raise SystemExit("unknown action " + action)
    out["errors_seen"] = sorted(set(seen_errors))
    json.dump(out, sys.stdout)


main()
