// Package mutants holds the node program's mutants: patch files, each a
// small slip in its fencing, election, replication, topic deletion or
// reassignment code, that scripts/mutants.sh applies to a scratch copy of
// the source to measure whether random runs with every fix on catch a bug
// nobody scripted. The package has no code; its test keeps every patch
// applicable to the node source as it stands, so a change to node/ that
// strands a mutant fails CI instead of the next measurement. It must not
// touch node/ itself.
package mutants
