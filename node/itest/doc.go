// Package itest holds the node program's integration tests: the issue's
// "Must show" list, run against a real ZooKeeper ensemble and node-program
// containers (cluster/, nemesis/). It has no non-test code; the tests need
// Docker (dockertest.Require) and skip in -short mode.
package itest
