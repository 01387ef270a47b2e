package power

import (
	"path/filepath"

	"github.com/zkchaos/zkchaos/nodecover"
	"github.com/zkchaos/zkchaos/rundir"
	"github.com/zkchaos/zkchaos/schedule"
)

// Novelties a run can bring its switch (Run.JoinedCorpus).
const (
	NewBlocks       = "new blocks"
	NewCombinations = "new combinations"
)

// search is what one switch's runs reached so far, in run order: the node
// blocks, the combinations, and (coverage-guided) the schedules that
// reached something new.
type search struct {
	blocks map[string]bool
	combos map[string]bool
	corpus []corpusEntry
}

// corpusEntry is a schedule that reached a block or a combination no
// earlier run of its switch had, and the run that ran it.
type corpusEntry struct {
	sched schedule.Schedule
	dir   string
}

func newSearch() *search {
	return &search{blocks: map[string]bool{}, combos: map[string]bool{}}
}

// add folds run r into the search: its combinations (r.Reached) always,
// and, when covered, the blocks its coverage.json lists (a run without one,
// its merge failed, reached none as far as the table knows). It fills
// r.NewCombinations, r.CombinationsUnion and r.Coverage, and returns what
// the run reached that no earlier run of the switch had.
func (s *search) add(r *Run, covered bool, parent corpusEntry, mutations []string) (novel []string) {
	for _, c := range r.Reached {
		if !s.combos[c] {
			s.combos[c] = true
			r.NewCombinations++
		}
	}
	r.CombinationsUnion = len(s.combos)
	if covered {
		if cov, err := nodecover.Read(r.RunDir); err == nil {
			rc := &RunCoverage{Blocks: cov.Blocks, Covered: cov.Covered, Parent: parent.dir, Mutations: mutations}
			for _, b := range cov.Reached {
				if !s.blocks[b] {
					s.blocks[b] = true
					rc.New++
				}
			}
			rc.Union = len(s.blocks)
			r.Coverage = rc
			if rc.New > 0 {
				novel = append(novel, NewBlocks)
			}
		}
	}
	if r.NewCombinations > 0 {
		novel = append(novel, NewCombinations)
	}
	return novel
}

// keep puts the schedule of run r, which brought novel, into the corpus
// and records why on r; a run whose schedule.json does not load stays out.
func (s *search) keep(r *Run, novel []string) {
	if len(novel) == 0 {
		return
	}
	sched, err := schedule.Load(filepath.Join(r.RunDir, rundir.ScheduleFile))
	if err != nil {
		return
	}
	s.corpus = append(s.corpus, corpusEntry{sched: sched, dir: r.RunDir})
	r.JoinedCorpus = novel
}
