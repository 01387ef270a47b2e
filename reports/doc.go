// Package reports owns what a run leaves for people and CI to read: the HTML
// failure report, the index of stored runs, JUnit XML and `chaos serve`.
// The files it reads (results.json, run.json, the history) have their
// formats in rundir/ and history/.
//
// It renders from a run directory only (history, results, schedule, logs);
// it never runs checks or containers.
//
// The report's warning boxes say what the history reader did: lines it
// skipped (a blank line, a cut-short last line, an empty file) under
// "partial history, lines skipped"; a source's wall clock stepping back,
// where nothing was skipped and the file order was kept, under its own box
// saying so.
package reports
