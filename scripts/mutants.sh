#!/usr/bin/env bash
# Mutation analysis of the harness: would a random run with every fix on
# catch a bug nobody scripted? Each mutants/NN-name.patch is a small slip
# in the node program's fencing, election or replication code. For each
# one this builds the committed tree (HEAD) with the patch applied in a
# scratch directory and runs `chaos power --switches every-fix-on` there,
# seed after seed, so the node program in the containers carries the
# mutant. The first run found invalid caught the mutant (later seeds are
# not run); the summary names that seed and the checkers.
#
#   scripts/mutants.sh [--seeds N] [--seed S] [--time-limit D] [--lock FILE]
#                      [--runs DIR] [--dry-run] [mutants/NN-name.patch ...]
#
# A patch may name the power flags its runs take, in a header line (before
# its first `diff --git`) such as
#   power: --faults delete-recreate-topic --openings=false
# for a slip only one fault kind reaches; they follow the defaults, so they
# override them (not --seeds, --seed, --time-limit, --lock or --runs, which
# this script sets). Without that line the runs are every-fix-on defaults.
# --dry-run checks that each patch applies to HEAD and prints the power
# command each seed would run, without building or starting anything.
#
# defaults: up to 3 seeds from seed 1, --time-limit 60s, every patch under
# mutants/, output under runs/mutants (one power directory per mutant, and
# summary.tsv). --lock takes the Docker lock per run, as chaos power does:
#   scripts/mutants.sh --lock /tmp/zkchaos-docker.lock
#
# Exit status: 0 every mutant caught, 1 some missed, 2 bad input or a
# patch that no longer applies to HEAD (the node moved: update the patch).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seeds=3 seed=1 limit=60s lock="" out=runs/mutants dry=false
patches=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=${2:?--seeds needs a number}; shift 2 ;;
    --seed) seed=${2:?--seed needs a number}; shift 2 ;;
    --time-limit) limit=${2:?--time-limit needs a duration}; shift 2 ;;
    --lock) lock=${2:?--lock needs a file}; shift 2 ;;
    --runs) out=${2:?--runs needs a directory}; shift 2 ;;
    --dry-run) dry=true; shift ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutants.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) patches+=("$1"); shift ;;
  esac
done
[ ${#patches[@]} -gt 0 ] || patches=(mutants/*.patch)
for i in "${!patches[@]}"; do
  p=${patches[$i]}
  [ -f "$p" ] || { echo "mutants.sh: no patch file $p" >&2; exit 2; }
  # Absolute: the patch is applied inside a scratch copy of the tree.
  case "$p" in /*) ;; *) patches[$i]="$root/$p" ;; esac
done
case "$out" in /*) ;; *) out="$root/$out" ;; esac

# patch_power prints the flags of a patch's "power:" header line (the
# first one before its diff), or nothing.
patch_power() {
  sed -n '/^diff --git /q; s/^power:[[:space:]]*//p' "$1" | head -1
}

if $dry; then
  for p in "${patches[@]}"; do
    name=$(basename "$p" .patch)
    git apply --check --cached "$p" || { echo "mutants.sh: $p does not apply to HEAD $(git rev-parse --short HEAD); update the patch" >&2; exit 2; }
    flags=$(patch_power "$p")
    for s in $(seq "$seed" $((seed + seeds - 1))); do
      echo "$name seed $s: chaos power --switches every-fix-on --seeds 1 --seed $s --time-limit $limit${lock:+ --lock $lock} --runs $out/$name/seed-$s${flags:+ $flags}"
    done
  done
  exit 0
fi
mkdir -p "$out"

export TESTCONTAINERS_RYUK_DISABLED=true GOFLAGS=-buildvcs=false
summary="$out/summary.tsv"
printf 'mutant\tpower flags\tseeds run\tcaught by seed\tcheckers\truns\n' > "$summary"
missed=0
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  src=$(mktemp -d "${TMPDIR:-/tmp}/zkchaos-mutant-$name.XXXX")
  # The committed tree only: a mutant is measured against what landed.
  git archive HEAD | tar -x -C "$src" || { echo "mutants.sh: cannot export HEAD" >&2; exit 2; }
  if ! (cd "$src" && git apply "$p"); then
    echo "mutants.sh: $p does not apply to HEAD $(git rev-parse --short HEAD); update the patch" >&2
    rm -rf "$src"
    exit 2
  fi
  (cd "$src" && go build -o bin/chaos ./cmd/chaos) || { echo "mutants.sh: $name does not build" >&2; rm -rf "$src"; exit 2; }
  flags=$(patch_power "$p")
  read -r -a extra <<<"$flags"
  echo "== mutant $name: up to $seeds seeds from $seed, $limit each${flags:+, power flags: $flags}"
  rm -rf "${out:?}/$name"
  # One power directory per seed, and no more seeds once one catches it:
  # the question is whether a mutant is found within N seeds.
  caught_at=- by=- ran=0
  for s in $(seq "$seed" $((seed + seeds - 1))); do
    ran=$((ran + 1))
    # Its own cache: the node binary built from the mutated source must
    # not replace the one other runs on this machine use.
    (cd "$src" && ZKCHAOS_CACHE="$src/.cache" bin/chaos power --switches every-fix-on \
      --seeds 1 --seed "$s" --time-limit "$limit" ${lock:+--lock "$lock"} --runs "$out/$name/seed-$s" ${extra[@]+"${extra[@]}"})
    st=$?
    pj="$out/$name/seed-$s/power.json"
    if [ "$st" -ne 0 ] || [ ! -f "$pj" ]; then
      echo "mutants.sh: chaos power failed for $name seed $s (exit $st); its runs stay in $out/$name" >&2
      rm -rf "$src"
      exit 2
    fi
    # A run found invalid: power's every-fix-on row counts it as caught.
    row=$(tr -d ' \n' < "$pj" | grep -o '"rows":\[{[^]]*}' | head -1)
    c=$(grep -o '"caught":[0-9]*' <<<"$row" | head -1 | cut -d: -f2)
    if [ "${c:-0}" -gt 0 ]; then
      caught_at=$s
      by=$(grep -o '"by_checker":{[^}]*}' <<<"$row" | sed 's/"by_checker"://; s/[{}"]//g; s/,/, /g')
      break
    fi
  done
  rm -rf "$src"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "${flags:--}" "$ran" "$caught_at" "${by:--}" "$out/$name" >> "$summary"
  [ "$caught_at" != - ] || missed=$((missed + 1))
done

echo
column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
total=$((${#patches[@]}))
echo "mutants caught: $((total - missed)) of $total (within $seeds random seeds each, every fix on, with each patch's power flags)"
[ "$missed" -eq 0 ]
