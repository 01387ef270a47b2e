// Package reports owns what a run leaves for people and CI to read: the HTML
// failure report, the index of stored runs, JUnit XML and `chaos serve`.
// The files it reads (results.json, run.json, the history) have their
// formats in rundir/ and history/.
//
// It renders from a run directory only (history, results, schedule, logs);
// it never runs checks or containers.
package reports
