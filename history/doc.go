// Package history owns the one event schema that every source of a run writes
// (clients, nodes, the ZooKeeper watcher, the nemesis, the harness), the
// streaming JSONL Writer that appends it, the Reader that decodes it with
// file-and-line errors, and the merge of per-source files into one ordered
// History in which every event has a unique index.
//
// It must not import any other package of this module: the node program, the
// harness and the checkers all depend on it, never the other way round.
//
// # Schema
//
// Each line of a history file is one JSON object, an Event. The header fields
// are the same for every kind:
//
//	{"v":1,"ts":1764696000000000000,"src":"n2","seq":17,"node":2,"kind":"control_request","control":{...}}
//
// v is the schema version (SchemaVersion); ts is wall-clock Unix nanoseconds from
// the host clock (containers share the host kernel, so sources are comparable);
// src names the writer; seq counts lines per source from 0 and breaks ties in
// time; node is the broker id for node events. Exactly one payload object,
// named after the kind's family, carries the facts (see Kind for the table).
// The schema only grows: fields and kinds are added, never renamed or removed;
// a reader rejects a version newer than it knows.
//
// # Run directory layout
//
// A run directory keeps its history as one JSONL file per source:
//
//	RUN_DIR/history/<source>.jsonl
//
// for example client-0.jsonl, client-1.jsonl, n1.jsonl, n2.jsonl, n3.jsonl,
// zk.jsonl (the ZooKeeper watcher), nemesis.jsonl and harness.jsonl. Every
// *.jsonl file in that folder is read; other files are ignored. ReadDir merges
// them into one History ordered by (ts, src, seq), which is stable and
// deterministic, and numbers the events 0..n-1 (Event.Index). Checkers refer to
// events by that index. Results of checking go to RUN_DIR/results.json (owned by
// the check command, not by this package).
//
// # Crashes and bad input
//
// A Writer issues one write per line, so after a crash a line is complete or
// absent, except that the very last line of a file may be cut short. The Reader
// therefore skips an unterminated, undecodable last line with a Warning and
// treats every other bad record (malformed JSON, unknown kind, missing payload,
// a version from the future, an empty file) as an error naming file and line.
package history
