// Package worknames finds names of work items and of numbered work periods
// ("issue" or "session" and a number) in project text. Figures, comments and docs
// say what a change did and name its commit or date instead: a reader of
// the repository has no list of issues or sessions to look such names up
// in, and BENCHMARKS.md titles its figures by build and date.
//
// A ZooKeeper session is not a work period: its id is printed in hex
// ("session 0x1f..."), which the pattern does not match, and a timeout or
// an expiry is not followed by a number.
package worknames

import (
	"regexp"
	"strings"
)

// pattern matches "issue" or "session", singular or plural, then a space or
// a hyphen, an optional "#" and a decimal number that ends at a word
// boundary, so a hex session id stays legitimate. TestFind has examples.
var pattern = regexp.MustCompile(`(?i)\b(issue|session)s?[ -]#?[0-9]+\b`)

// Hit is one work-item name: its 1-based line and the name as written.
type Hit struct {
	Line int
	Name string
}

// Find returns every work-item name in text, in order.
func Find(text string) []Hit {
	var hits []Hit
	for i, line := range strings.Split(text, "\n") {
		for _, m := range pattern.FindAllString(line, -1) {
			hits = append(hits, Hit{Line: i + 1, Name: m})
		}
	}
	return hits
}
