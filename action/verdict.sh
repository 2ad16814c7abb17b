#!/usr/bin/env bash
# The verdict for the action: the base fetched where a shallow checkout lacks it, then `harness
# verdict` on the project; its exit status and the files it wrote go to the step's outputs, and the
# job's summary gets the comment (the harness appends it to $GITHUB_STEP_SUMMARY).
set -uo pipefail
project="${INPUT_PROJECT:-.}"
base="${INPUT_BASE:?the base revision: on a pull_request event it is the pull request base}"
head="${INPUT_HEAD:-HEAD}"
out="${RUNNER_TEMP:-$(mktemp -d)}/verdict"
if ! git -C "$project" cat-file -e "$base^{commit}" 2>/dev/null; then
  git -C "$project" fetch --no-tags --quiet --depth=1 origin "$base" || true
fi
args=(verdict "$project" --base "$base" --head "$head" --engine venv --out "$out"
      --results "${RUNNER_TEMP:-.}/harness-results" --repeats "${INPUT_REPEATS:-3}")
if [ -n "${INPUT_SCRIPT:-}" ]; then args+=(--script "$INPUT_SCRIPT"); fi
if [ -n "${INPUT_FACTORY:-}" ]; then args+=(--factory "$INPUT_FACTORY" --data "${INPUT_DATA:-}"); fi
if [ -n "${INPUT_REQUIREMENTS:-}" ]; then args+=(--requirements "$INPUT_REQUIREMENTS"); fi
if [ -n "${INPUT_ARGS:-}" ]; then
  eval "extra=($INPUT_ARGS)"
  args+=(--args "${extra[@]}")
fi
"${HARNESS_PYTHON:-python}" -m harness "${args[@]}"
code=$?
verdict=""
if [ -f "$out/verdict.json" ]; then
  verdict="$("${HARNESS_PYTHON:-python}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["verdict"])' \
    "$out/verdict.json")"
fi
{
  echo "exit-code=$code"
  echo "verdict=$verdict"
  echo "comment-file=$out/COMMENT.md"
  echo "json-file=$out/verdict.json"
} >> "${GITHUB_OUTPUT:-/dev/null}"
exit 0   # the last step exits as the verdict does, after the comment is posted
