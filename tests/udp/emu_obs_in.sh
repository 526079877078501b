#!/usr/bin/env bash
# test_udp_emu_obs_in: cudaq-udp-emu's shot-file layouts. Against
# cudaq-udp-serve (MWPM) on loopback, the d = 3 shots (tests/udp/data,
# 24 detectors + 1 observable appended) give the same logical-error count
# as qec-decode count_mistakes on the same shots whether the observables are
# appended (01, b8) or come from --obs_in (01, b8), and inverted observables
# from --obs_in give decoded - that count (the file is read, not ignored).
# Without --obs_in, a detector-only file is refused (exit 1) with what a
# record should hold and the --obs_in hint; a detector-only b8 file whose
# records have room for the observable in their padding reads, with a note;
# --num-dets without --num-obs says that logical errors are not counted.
# Usage: emu_obs_in.sh SERVE EMU QEC_DECODE DATA_DIR WORK_DIR
set -uo pipefail
SERVE=$1 EMU=$2 QD=$3 DATA=$4 WORK=$5
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
DEM=$DATA/d3.dem SHOTS=$DATA/d3_shots.01 ND=24
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 01 records -> b8 (LSB first, each record padded to whole bytes).
to_b8() {
  local line v b i
  while IFS= read -r line; do
    for ((b = 0; 8 * b < ${#line}; b++)); do
      v=0
      for ((i = 0; i < 8 && 8 * b + i < ${#line}; i++)); do
        [ "${line:8*b+i:1}" = 1 ] && v=$((v | 1 << i))
      done
      printf "\\$(printf %03o "$v")"
    done
  done < "$1"
}
cut -c1-$ND "$SHOTS" > "$WORK/dets.01"
cut -c$((ND + 1)) "$SHOTS" > "$WORK/obs.01"
tr 01 10 < "$WORK/obs.01" > "$WORK/obs_inv.01"
head -100 "$WORK/obs.01" > "$WORK/obs_short.01"
to_b8 "$SHOTS" > "$WORK/app.b8"
to_b8 "$WORK/dets.01" > "$WORK/dets.b8"
to_b8 "$WORK/obs.01" > "$WORK/obs.b8"
head -199 "$WORK/dets.01" > "$WORK/dets199.01"
to_b8 "$WORK/dets199.01" > "$WORK/dets199.b8" # 597 bytes: 199 x 3, not a multiple of 4
n=$(wc -l < "$SHOTS")

# A 23-detector DEM: its b8 records are 3 bytes with or without the
# observable appended (bit 23, the padding of a detector-only record).
{ for ((d = 0; d < 22; d++)); do echo "error(0.01) D$d D$((d + 1))"; done
  echo "error(0.01) D0 L0"; echo "error(0.01) D22"; } > "$WORK/d23.dem"
cut -c1-23 "$SHOTS" > "$WORK/d23_dets.01"
paste -d '' "$WORK/d23_dets.01" "$WORK/obs.01" > "$WORK/d23_app.01"
to_b8 "$WORK/d23_dets.01" > "$WORK/d23_dets.b8"
to_b8 "$WORK/d23_app.01" > "$WORK/d23_app.b8"

expected=$("$QD" count_mistakes --dem "$DEM" --in "$WORK/dets.01" --in_format 01 \
  --obs_in "$WORK/obs.01" | sed -nE 's/^([0-9]+) \/ .*/\1/p')
[ -n "$expected" ] || { echo "FAIL: qec-decode count_mistakes gave no count"; exit 1; }

"$SERVE" --dem "$DEM" --port 0 --seconds 120 > "$WORK/serve.log" 2>&1 &
spid=$!
trap 'kill -INT "$spid" 2>/dev/null; wait "$spid" 2>/dev/null' EXIT
port=
for _ in $(seq 100); do
  port=$(sed -nE 's/.* on port ([0-9]+) .*/\1/p' "$WORK/serve.log")
  [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: the service did not start"; cat "$WORK/serve.log"; exit 1; }

# emu NAME ARGS...: runs the emulator (closed loop) into NAME.out / NAME.err;
# sets rc, decoded and errors (from its last line).
emu() {
  local name=$1; shift
  "$EMU" --port "$port" --closed-loop --wait-ms 5000 "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
  rc=$?
  decoded=$(sed -nE 's/^decoded ([0-9]+), logical errors.*/\1/p' "$WORK/$name.out")
  errors=$(sed -nE 's/^decoded [0-9]+, logical errors ([0-9]+)$/\1/p' "$WORK/$name.out")
}
# counts NAME WANT ARGS...: the run must decode every shot with WANT logical errors.
counts() {
  local name=$1 want=$2; shift 2
  emu "$name" "$@"
  echo "$name: exit $rc, decoded ${decoded:-?}, logical errors ${errors:-?} (want $want)"
  [ "$rc" = 0 ] && [ "${decoded:-}" = "$n" ] && [ "${errors:-}" = "$want" ] ||
    { bad "$name"; cat "$WORK/$name.out" "$WORK/$name.err"; }
}
# refused NAME TEXT... -- ARGS...: the run must exit 1 before sending, its
# message holding every TEXT.
refused() {
  local name=$1 t; shift
  local texts=()
  while [ "$1" != -- ]; do texts+=("$1"); shift; done; shift
  emu "$name" "$@"
  echo "$name: exit $rc: $(head -1 "$WORK/$name.err")"
  [ "$rc" = 1 ] && [ ! -s "$WORK/$name.out" ] || bad "$name: exit $rc, want 1 before sending"
  for t in "${texts[@]}"; do grep -qF -- "$t" "$WORK/$name.err" || bad "$name: no '$t' in the message"; done
}

counts appended_01 "$expected" --dem "$DEM" --shots "$SHOTS" --format 01
counts appended_b8 "$expected" --dem "$DEM" --shots "$WORK/app.b8" --format b8
counts obs_in_01 "$expected" --dem "$DEM" --shots "$WORK/dets.01" --format 01 --obs_in "$WORK/obs.01"
counts obs_in_b8 "$expected" --dem "$DEM" --shots "$WORK/dets.b8" --format b8 \
  --obs_in "$WORK/obs.b8" --obs_in_format b8
counts obs_in_num_obs "$expected" --num-dets $ND --num-obs 1 --shots "$WORK/dets.b8" --format b8 \
  --obs_in "$WORK/obs.01"
counts obs_in_inverted $((n - expected)) --dem "$DEM" --shots "$WORK/dets.01" --format 01 \
  --obs_in "$WORK/obs_inv.01"

refused dets_01_no_obs_in "record 1 has 24 bits; expected 24 detectors + 1 observable = 25 bits" \
  "observables appended; use --obs_in" "give the observables with --obs_in" -- \
  --dem "$DEM" --shots "$WORK/dets.01" --format 01
refused dets_b8_no_obs_in "597 bytes is not a whole number of b8 records of 4 bytes" \
  "expected 24 detectors + 1 observable = 25 bits" "fits records of the detectors only" -- \
  --dem "$DEM" --shots "$WORK/dets199.b8" --format b8
refused appended_with_obs_in "record 1 has 25 bits; expected 24 detectors" "leave out --obs_in" -- \
  --dem "$DEM" --shots "$SHOTS" --format 01 --obs_in "$WORK/obs.01"
refused obs_in_short "has 100 records" "$n" -- \
  --dem "$DEM" --shots "$WORK/dets.01" --format 01 --obs_in "$WORK/obs_short.01"
refused obs_in_no_count "--obs_in needs the number of observables" -- \
  --num-dets $ND --shots "$WORK/dets.01" --format 01 --obs_in "$WORK/obs.01"

# --num-dets alone: no observables, so no logical-error count (not "0").
emu num_dets_only --num-dets $ND --shots "$WORK/dets.01" --format 01
echo "num_dets_only: exit $rc: $(tail -1 "$WORK/num_dets_only.out")"
[ "$rc" = 0 ] && [ "${decoded:-}" = "$n" ] && [ -z "${errors:-}" ] &&
  grep -q "^decoded $n, logical errors not counted" "$WORK/num_dets_only.out" || bad num_dets_only

# b8 padding: a detector-only file reads as one with appended observables,
# all 0: a note; none when the appended observables are there.
emu d23_dets_b8 --dem "$WORK/d23.dem" --shots "$WORK/d23_dets.b8" --format b8
echo "d23_dets_b8: exit $rc: $(head -1 "$WORK/d23_dets_b8.err")"
[ "$rc" = 0 ] && grep -q "note: .*every record's appended observables read 0.*--obs_in" \
  "$WORK/d23_dets_b8.err" || bad "d23_dets_b8: no note"
emu d23_app_b8 --dem "$WORK/d23.dem" --shots "$WORK/d23_app.b8" --format b8
echo "d23_app_b8: exit $rc, stderr $(wc -c < "$WORK/d23_app_b8.err") bytes"
[ "$rc" = 0 ] && [ ! -s "$WORK/d23_app_b8.err" ] || bad "d23_app_b8: a note with observables present"

"$EMU" --help > "$WORK/help.out" 2>&1 || bad "--help: exit $?"
grep -q "observables" "$WORK/help.out" && grep -q -- "--obs_in" "$WORK/help.out" || bad "--help text"

[ "$fail" = 0 ] && echo PASS || echo FAIL
exit $fail
