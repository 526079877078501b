#!/bin/sh
# qec-decode against PyMatching's command line: the same argument lists must
# give the same outputs (on d = 3 data where the two never disagree), and bad
# input must fail with a message naming the line.
# Usage: test_cli.sh QEC_DECODE REF_DIR VENV_DIR
set -eu
QD=$1 REF=$2 VENV=$3
PM="$VENV/bin/pymatching"
[ -x "$PM" ] || { echo "missing $PM: run scripts/venv.sh" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass=0
check() { # name, then the argument list shared by both tools
  name=$1; shift
  "$QD" "$@" > "$T/ours" || fail "$name: qec-decode exited $?"
  "$PM" "$@" > "$T/theirs" || fail "$name: pymatching exited $?"
  cmp -s "$T/ours" "$T/theirs" || fail "$name: outputs differ"
  pass=$((pass + 1))
}
for n in x_d3_p0.005 z_d3_p0.005; do
  D="$REF/$n"
  check "$n predict b8->01" predict --dem "$D.dem" --in "$D.b8" --in_format b8 --out_format 01
  check "$n predict b8->b8" predict --dem "$D.dem" --in "$D.b8" --in_format b8 --out_format b8
  for f in dets b8 01; do
    check "$n predict $f appended" predict --dem "$D.dem" --in "$D.app.$f" --in_format "$f" \
      --in_includes_appended_observables --out_format 01
    check "$n count_mistakes $f appended" count_mistakes --dem "$D.dem" --in "$D.app.$f" \
      --in_format "$f" --in_includes_appended_observables
  done
  check "$n count_mistakes obs_in" count_mistakes --dem "$D.dem" --in "$D.b8" --in_format b8 \
    --obs_in "$D.obs.01" --obs_in_format 01
  # --out FILE writes the same bytes as stdout.
  "$QD" predict --dem "$D.dem" --in "$D.b8" --in_format b8 --out "$T/file.01" --out_format 01
  "$QD" predict --dem "$D.dem" --in "$D.b8" --in_format b8 --out_format 01 > "$T/stdout.01"
  cmp -s "$T/file.01" "$T/stdout.01" || fail "--out differs from stdout"
  pass=$((pass + 1))
done
# Bad input: a clear message and a non-zero exit, never a crash.
printf 'error(0.1) D0 D1\nerror(0.1) D0 D1 D2\n' > "$T/bad.dem"
if "$QD" predict --dem "$T/bad.dem" --in /dev/null 2> "$T/err"; then fail "bad dem accepted"; fi
grep -q "bad.dem:2: error is not graph-like" "$T/err" || fail "message: $(cat "$T/err")"
printf 'error(0.1) D0\nerror(0.1) D0 D1\n' > "$T/ok.dem"
printf '01\n0x\n' > "$T/bad.01"
if "$QD" predict --dem "$T/ok.dem" --in "$T/bad.01" --in_format 01 2> "$T/err" > /dev/null; then fail "bad 01 accepted"; fi
grep -q "record 2" "$T/err" || fail "message: $(cat "$T/err")"
if "$QD" bogus --dem "$T/ok.dem" 2> /dev/null; then fail "unknown command accepted"; fi
# The command is named before a missing --dem; a directory as input is named with its reason.
rc=0; "$QD" frobnicate 2> "$T/err" || rc=$?
[ $rc -eq 2 ] && grep -q "unknown command 'frobnicate'" "$T/err" || fail "frobnicate: exit $rc, $(cat "$T/err")"
if "$QD" predict --dem "$T/ok.dem" --in "$T" 2> "$T/err" > /dev/null; then fail "directory input accepted"; fi
grep -q "cannot read --in '$T': Is a directory" "$T/err" || fail "directory message: $(cat "$T/err")"
if "$QD" predict 2> /dev/null; then fail "missing --dem accepted"; fi
pass=$((pass + 4))

# dets with a token repeated: set once, as stim's reader reads it (PyMatching's
# command line fails on such a file, so the reference is stim's reader and
# PyMatching's decode_batch).
printf 'error(0.1) D0 L0\nerror(0.1) D0 D1\nerror(0.1) D1\n' > "$T/dup.dem"
printf 'shot D1 D1\nshot D0 D0 D1\nshot D0 D0\n' > "$T/dup.dets"
printf 'shot D1 D1 L0 L0\nshot D0 D0 D1\nshot D0 D0 L0 L0\n' > "$T/dupapp.dets"
"$VENV/bin/python" -c "
import sys, stim, pymatching
d = stim.read_shot_data_file(path=sys.argv[2], format='dets', num_detectors=2)
m = pymatching.Matching.from_detector_error_model(stim.DetectorErrorModel(open(sys.argv[1]).read()))
sys.stdout.write(''.join(str(int(p[0])) + '\\n' for p in m.decode_batch(d)))" \
  "$T/dup.dem" "$T/dup.dets" > "$T/dup.want" || fail "stim reference for repeated dets tokens"
"$QD" predict --dem "$T/dup.dem" --in "$T/dup.dets" --in_format dets > "$T/dup.got" ||
  fail "dets repeated tokens: exit $?"
cmp -s "$T/dup.got" "$T/dup.want" || fail "dets repeated tokens: $(cat "$T/dup.got") not $(cat "$T/dup.want")"
"$QD" count_mistakes --dem "$T/dup.dem" --in "$T/dupapp.dets" --in_format dets \
  --in_includes_appended_observables > "$T/dup.got" || fail "dets repeated tokens appended: exit $?"
[ "$(cat "$T/dup.got")" = "1 / 3" ] || fail "dets repeated tokens appended: $(cat "$T/dup.got"), not 1 / 3"
pass=$((pass + 2))
# PyMatching 2.4's defaults: predict reads b8, count_mistakes reads 01 (the
# same argument lists without --in_format give the same outputs).
for n in x_d3_p0.005; do
  D="$REF/$n"
  check "$n predict default b8" predict --dem "$D.dem" --in "$D.b8"
done
# expect NAME PHRASE ARGS...: qec-decode fails (exit != 0) and stderr has PHRASE.
expect() {
  name=$1 phrase=$2; shift 2
  if "$QD" "$@" > /dev/null 2> "$T/err"; then fail "$name: accepted"; fi
  grep -qF -- "$phrase" "$T/err" || fail "$name: message: $(cat "$T/err")"
  pass=$((pass + 1))
}
# --help, -h (also after a command, before --dem) and --version: stdout, exit 0.
for h in "--help" "-h" "predict --help" "count_mistakes -h"; do
  # shellcheck disable=SC2086
  "$QD" $h > "$T/out" 2>&1 || fail "$h exited $?"
  grep -q "usage:" "$T/out" || fail "$h: no usage"
  pass=$((pass + 1))
done
"$QD" --version | grep -qE "^qec-decode \(cudaq-realtime\) [0-9]+\.[0-9]+" || fail "--version"
pass=$((pass + 1))
expect "bad --in_format named" "--in_format 'b9' is not a format: use 01, b8 or dets" \
  predict --dem "$T/ok.dem" --in_format b9
expect "bad --obs_in_format named" "--obs_in_format 'x' is not a format" \
  count_mistakes --dem "$T/ok.dem" --in_includes_appended_observables --obs_in_format x
printf '101\n' > "$T/wide.01"
expect "01 width" "the first 01 record has 3 bits, the DEM needs 2" \
  predict --dem "$T/ok.dem" --in "$T/wide.01" --in_format 01
printf 'error(0.1) D0\nerror(0.1) D0 D1\nerror(0.1) D1 D2 ^ D9\n' > "$T/ten.dem"
printf '\001\002\003' > "$T/three.b8"
expect "b8 width" "b8 records of 10 bits are 2 bytes each, but the file has 3 bytes" \
  predict --dem "$T/ten.dem" --in "$T/three.b8"
# A 01 file read as b8 (predict's default) is refused whatever its size
# (6 bytes would be 6 records of 2 detectors).
printf '01\n10\n' > "$T/two.01"
expect "01 read as b8" "two.01: read as b8, but it is 01 text (2 lines of 2 '0'/'1' characters): give --in_format 01" \
  predict --dem "$T/ok.dem" --in "$T/two.01"
# An observables-only file is named as such (not 'detectors + appended observables').
printf 'error(0.1) D0 L0\nerror(0.1) D0 D1\n' > "$T/okobs.dem"
printf '00\n' > "$T/obswide.01"
expect "observables file width" "the first 01 record has 2 bits, the DEM needs 1 (observables) (is --obs_in_format right?)" \
  count_mistakes --dem "$T/okobs.dem" --in "$T/two.01" --obs_in "$T/obswide.01"
# Two sources of the true observables: refused (exit 2), never one ignored.
rc=0; "$QD" count_mistakes --dem "$T/okobs.dem" --in "$T/two.01" --in_includes_appended_observables \
  --obs_in "$T/obswide.01" > /dev/null 2> "$T/err" || rc=$?
[ $rc -eq 2 ] && grep -qF -- "--obs_in and --in_includes_appended_observables both give the observables: use one" "$T/err" ||
  fail "--obs_in with appended observables: exit $rc, $(cat "$T/err")"
pass=$((pass + 1))
# b8 padding bits (past the record's width) must be 0, as PyMatching says:
# 2-detector records are 1 byte, bit 2 of record 2 set; observables too.
printf '\001\004' > "$T/pad.b8"
expect "b8 padding bit" "record 2: b8 format: bit 2 is set, but a record has 2 bits" \
  predict --dem "$T/ok.dem" --in "$T/pad.b8"
printf '\000\000' > "$T/zero.b8"
printf '\001\002' > "$T/obspad.b8"
expect "b8 observable padding bit" "obs_in: record 2: b8 format: bit 1 is set, but a record has 1 bits" \
  count_mistakes --dem "$T/okobs.dem" --in "$T/zero.b8" --in_format b8 --obs_in "$T/obspad.b8" \
  --obs_in_format b8
expect "missing --in file" "cannot open --in '$T/none.b8': No such file or directory" \
  predict --dem "$T/ok.dem" --in "$T/none.b8"
expect "missing --out directory" "cannot open --out '$T/none/p.01': No such file or directory" \
  predict --dem "$T/ok.dem" --in "$T/pad.b8" --out "$T/none/p.01"
expect "--obs_in -" "--obs_in cannot be '-' (stdin or stdout): give a file" \
  count_mistakes --dem "$T/ok.dem" --in "$T/two.01" --obs_in -
expect "missing --dem file" "cannot open --dem '$T/none.dem': No such file or directory" \
  predict --dem "$T/none.dem"
printf 'error(0.1) D0 D1\nerror(0.1) D1 D2\n' > "$T/noboundary.dem"
printf '001\n' > "$T/odd.01"
expect "no matching" "shot 1: no set of errors in the DEM produces these detection events" \
  predict --dem "$T/noboundary.dem" --in "$T/odd.01" --in_format 01
# An output naming a file the run reads (also through a link) is refused with
# exit 2 before it is opened: opening it would truncate the input, read as
# empty (0 shots, exit 0) or overwritten. The input is left as it was.
cp "$T/two.01" "$T/keep.01"
ln -sf "$T/keep.01" "$T/keep_link.01"
for out in "$T/keep.01" "$T/keep_link.01"; do
  rc=0; "$QD" predict --dem "$T/ok.dem" --in "$T/keep.01" --in_format 01 --out "$out" \
    > /dev/null 2> "$T/err" || rc=$?
  [ $rc -eq 2 ] && grep -qF -- "--out '$out' is the same file as --in" "$T/err" ||
    fail "--out over --in ($out): exit $rc, $(cat "$T/err")"
  cmp -s "$T/keep.01" "$T/two.01" || fail "--out over --in ($out): the input was changed"
  pass=$((pass + 1))
done
cp "$T/ok.dem" "$T/keep.dem"
expect "--out over --dem" "--out '$T/keep.dem' is the same file as --dem" \
  predict --dem "$T/keep.dem" --in "$T/keep.01" --in_format 01 --out "$T/keep.dem"
cmp -s "$T/keep.dem" "$T/ok.dem" || fail "--out over --dem: the DEM was changed"
printf '0\n1\n' > "$T/keep_obs.01"
expect "--out over --obs_in" "--out '$T/keep_obs.01' is the same file as --obs_in" \
  count_mistakes --dem "$T/okobs.dem" --in "$T/keep.01" --obs_in "$T/keep_obs.01" \
  --out "$T/keep_obs.01"
expect "--json over --in" "--json '$T/keep.01' is the same file as --in" \
  count_mistakes --dem "$T/okobs.dem" --in "$T/keep.01" --obs_in "$T/keep_obs.01" \
  --predecoder local --json "$T/keep.01"
expect "--json over --out" "--json '$T/new.out' is the same file as --out" \
  count_mistakes --dem "$T/okobs.dem" --in "$T/keep.01" --obs_in "$T/keep_obs.01" \
  --predecoder local --out "$T/new.out" --json "$T/new.out"
# A write that fails at the end (the last buffered records) is named, exit 1.
if [ -w /dev/full ]; then
  expect "write error at the end" "write error on --out '/dev/full'" \
    predict --dem "$T/ok.dem" --in "$T/keep.01" --in_format 01 --out /dev/full
  rc=0; "$QD" count_mistakes --dem "$T/okobs.dem" --in "$T/keep.01" --obs_in "$T/keep_obs.01" \
    > /dev/full 2> "$T/err" || rc=$?
  [ $rc -eq 1 ] && grep -qF "write error on stdout" "$T/err" ||
    fail "count_mistakes > /dev/full: exit $rc, $(cat "$T/err")"
  pass=$((pass + 1))
fi

# --threads N (cudaq_mwpm_decode_batch, 4096 shots at a time): the same bytes
# as one thread, plain and correlated, predict and count_mistakes (both
# observable routes); errors name the same shot, after the same output.
for n in x_d7_p0.01 z_d5_p0.005; do
  D="$REF/$n"
  for args in "predict --dem $D.dem --in $D.b8" \
              "predict --dem $D.dem --in $D.b8 --enable_correlations --out_format b8" \
              "count_mistakes --dem $D.dem --in $D.app.b8 --in_format b8 --in_includes_appended_observables" \
              "count_mistakes --dem $D.dem --in $D.b8 --in_format b8 --obs_in $D.obs.01"; do
    # shellcheck disable=SC2086
    "$QD" $args > "$T/t1" || fail "$n $args: exited $?"
    for th in 2 3; do
      # shellcheck disable=SC2086
      "$QD" $args --threads "$th" > "$T/tn" || fail "$n $args --threads $th: exited $?"
      cmp -s "$T/t1" "$T/tn" || fail "$n $args --threads $th: output differs from one thread"
      pass=$((pass + 1))
    done
  done
done
# 5000 shots, shot 4500 (in the second chunk) without a matching.
"$VENV/bin/python" -c "
import sys
rows = ['110'] * 5000
rows[4499] = '100'
sys.stdout.write(''.join(r + '\\n' for r in rows))" > "$T/late.01"
printf 'error(0.1) D0 D1 L0\nerror(0.1) D2\n' > "$T/late.dem"
for th in 1 2; do
  if "$QD" predict --dem "$T/late.dem" --in "$T/late.01" --in_format 01 --threads "$th" \
      > "$T/late.out$th" 2> "$T/err"; then fail "late no-matching accepted"; fi
  grep -qF "shot 4500: no set of errors" "$T/err" || fail "--threads $th: message: $(cat "$T/err")"
  pass=$((pass + 1))
done
cmp -s "$T/late.out1" "$T/late.out2" || fail "--threads 2: output before the failing shot differs"
[ "$(wc -l < "$T/late.out2")" -eq 4499 ] || fail "--threads 2: $(wc -l < "$T/late.out2") lines before the failure"
expect "--threads 0" "--threads needs a number of threads from 1 to 256" \
  predict --dem "$T/ok.dem" --threads 0
expect "--threads x" "--threads needs a number of threads" predict --dem "$T/ok.dem" --threads 2x
expect "--threads with --predecoder" "cannot be combined with --predecoder" \
  predict --dem "$T/ok.dem" --threads 2 --predecoder local
echo "$pass passed, 0 failed"
