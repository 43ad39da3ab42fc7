#!/bin/bash
# usage: lint_audit_exclusion.sh NAME... ; prints hit count per name over all exclusion sources
# (the exclusion grep of audits 2026-12-07b and -d, formerly each audit's excl.sh; unchanged logic)
srcs=(/work/shared/heldout-projects.txt /work/main/bench/lint_realworld/*.tsv /work/main/tests/lint_corpus /work/main/tests/lint_eval /work/main/docs/lint.md /work/main/bench/README.md /work/main/bench/lint_audits/*/ /work/wt/audit_*/bench/lint_audits/*/)
for n in "$@"; do
  c=$(grep -ri -F -- "$n" "${srcs[@]}" 2>/dev/null | wc -l)
  # also underscore/dash variants
  alt=${n//-/_}; c2=0; [ "$alt" != "$n" ] && c2=$(grep -ri -F -- "$alt" "${srcs[@]}" 2>/dev/null | wc -l)
  echo "$n $c $c2"
done
