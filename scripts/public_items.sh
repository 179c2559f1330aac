#!/usr/bin/env bash
# The public face of each crate, counted (issue 28 item 5): items declared `pub` (fn, struct,
# enum, trait, mod, type, const, static; `pub(crate)`, `pub(super)` and `pub(in …)` are not
# counted) in the product code of each crate's `src/` — test files (`tests.rs`, `*_tests.rs`)
# and a file's `#[cfg(test)] mod tests` are left out, as in `tests/it/architecture.rs`'s 600-line
# check. `pub use` re-exports are counted apart. A grep, not rustdoc: an item declared `pub`
# inside a private module is counted although it is not reachable, so the figure is an upper
# bound on what a user sees, and it moves when a module or item turns `pub(crate)`.
#
# Usage: bash scripts/public_items.sh [--modules]   (--modules also lists each crate's pub mods)
set -euo pipefail
cd "$(dirname "$0")/.."

list_modules=0
case "${1:-}" in
  "") ;;
  --modules) list_modules=1 ;;
  *) echo "usage: bash scripts/public_items.sh [--modules]" >&2; exit 2 ;;
esac

# Product code of one file: its text before `#[cfg(test)]` followed by `mod tests`.
product() {
  awk 'prev ~ /^#\[cfg\(test\)\]$/ && /^mod tests/ { exit } { if (NR > 1) print prev; prev = $0 } END { if (prev !~ /^#\[cfg\(test\)\]$/) print prev }' "$1"
}

items='^[[:space:]]*pub (async |const |unsafe |extern "C" )*(fn|struct|enum|trait|mod|type|const|static|union) '
reexports='^[[:space:]]*pub use '

printf '%-14s %6s %6s %6s %6s %6s %6s\n' crate items fn type mod const use
for dir in crates/*/ python/; do
  src="${dir}src"
  [ -d "$src" ] || continue
  name=$(basename "$dir")
  [ "$name" = python ] && name=python
  files=$(find "$src" -name '*.rs' ! -name 'tests.rs' ! -name '*_tests.rs' | sort)
  text=$(for f in $files; do product "$f"; done)
  count() { grep -cE "$1" <<<"$text" || true; }
  all=$(count "$items")
  fns=$(count '^[[:space:]]*pub (async |const |unsafe |extern "C" )*fn ')
  types=$(count '^[[:space:]]*pub (struct|enum|trait|type|union) ')
  mods=$(count '^[[:space:]]*pub mod ')
  consts=$(count '^[[:space:]]*pub (const|static) ')
  uses=$(count "$reexports")
  printf '%-14s %6s %6s %6s %6s %6s %6s\n' "$name" "$all" "$fns" "$types" "$mods" "$consts" "$uses"
  if [ "$list_modules" = 1 ]; then
    for f in $files; do
      product "$f" | grep -E '^[[:space:]]*pub mod ' | sed -E "s|^[[:space:]]*pub mod ([a-z_0-9]+).*|    $f: \1|" || true
    done
  fi
done
