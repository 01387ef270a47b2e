// Package compat is the client compatibility suite: Kafka clients nobody in
// this project wrote — kcat (librdkafka) and kafka-python, both from
// Debian's packages (scripts/setup.sh installs them) — and franz-go's
// idempotent producer, run against a real cluster of node programs on
// containers (a ZooKeeper ensemble and three nodes). It checks what a
// ZooKeeper-era broker gives any client: metadata, produce with acks 0, 1
// and all, fetch from an offset, ListOffsets earliest and latest, the
// idempotent producer, consumer groups (kcat -G and kafka-python's group
// consumer: coordinator look-up, join, commits), and the errors around a
// leader change. TestUpClientsUnderFaults drives the product as a user
// does instead: it starts `chaos up`, reads the addresses it prints, runs
// sarama's, kcat's and kafka-python's group consumers and a franz-go
// transactional consume-transform-produce pipeline, and breaks the cluster
// with `chaos fault` while the pipeline runs.
//
// It has only tests. It talks to the nodes through the Kafka protocol and
// ZooKeeper, never the node's Go internals. Under CI=true a missing Docker
// Engine or client program fails the suite rather than skipping it.
package compat
