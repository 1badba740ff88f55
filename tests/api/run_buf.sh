#!/usr/bin/env bash
# One buf check on proto/ (the working directory), for ctest:
#   run_buf.sh BUF lint|format|breaking|breaking-selftest
set -euo pipefail
buf="$1"
if [[ ! -x "$buf" ]]; then
  echo "$buf not found: run 'npm ci --prefix tests/api' (the README's test" \
       "command does)" >&2
  exit 1
fi
case "$2" in
  lint) exec "$buf" lint ;;
  # Prints the diff a `buf format -w` would apply.
  format) exec "$buf" format --diff --exit-code ;;
  # api-v1.binpb: `buf build --exclude-source-info -o api-v1.binpb` at the
  # v1 release (docs/API.md, "Compatibility").
  breaking) exec "$buf" breaking --against api-v1.binpb ;;
  # The guard itself: a copy of the API with field 1 of ContentBlock
  # turned back into a bool and SeriesState's reserved 4 reused must fail
  # `buf breaking`, naming both.
  breaking-selftest)
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    cp -r . "$scratch/proto"
    file="$scratch/proto/phasor/v1/encoder.proto"
    sed -i 's/optional double scale = 1;/optional bool scale = 1;/' "$file"
    sed -i 's/^  reserved 4;$/  int64 rows = 4;/; s/^  reserved "rows";$//' "$file"
    grep -q 'optional bool scale = 1;' "$file"
    grep -q 'int64 rows = 4;' "$file"
    if output="$(cd "$scratch/proto" && "$buf" breaking --against api-v1.binpb 2>&1)"; then
      echo "buf breaking accepted a changed field type and a reused number" >&2
      exit 1
    fi
    echo "$output"
    grep -q 'changed type from "double" to "bool"' <<<"$output"
    grep -q 'rows' <<<"$output"
    ;;
  *) echo "usage: $0 BUF lint|format|breaking|breaking-selftest" >&2; exit 2 ;;
esac
