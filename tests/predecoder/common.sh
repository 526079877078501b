# Shared by the predecoder test scripts (sourced; POSIX sh).

# pd_predict QD DEM IN FMT OUT [qec-decode flags...]: qec-decode predict into
# OUT (01), over $JOBS processes on slices of a b8 file (fixed-size records,
# joined in order): the CPU executor is slow on large models. Exit status of
# the first failing process; its stderr is printed.
pd_predict() {
  _qd=$1 _dem=$2 _in=$3 _fmt=$4 _out=$5
  shift 5
  _jobs=${JOBS:-$(nproc 2>/dev/null || echo 1)}
  _nd=$(sed -n 's/^num_detectors //p' "$(dirname "$_in")/info.txt" 2>/dev/null || true)
  if [ "$_fmt" != b8 ] || [ "$_jobs" -le 1 ] || [ -z "$_nd" ]; then
    "$_qd" predict --dem "$_dem" --in "$_in" --in_format "$_fmt" --out_format 01 --out "$_out" "$@"
    return $?
  fi
  _rec=$(( (_nd + 7) / 8 ))
  _shots=$(( $(wc -c < "$_in") / _rec ))
  _per=$(( (_shots + _jobs - 1) / _jobs ))
  [ "$_per" -gt 0 ] || _per=1
  rm -f "$_out".slice.*
  split -a 3 -d -b $((_per * _rec)) "$_in" "$_out.slice."
  _pids=""
  for _s in "$_out".slice.[0-9][0-9][0-9]; do
    "$_qd" predict --dem "$_dem" --in "$_s" --in_format b8 --out_format 01 --out "$_s.01" "$@" \
      2> "$_s.err" &
    _pids="$_pids $!"
  done
  _rc=0
  for _p in $_pids; do wait "$_p" || _rc=$?; done
  if [ "$_rc" -ne 0 ]; then
    cat "$_out".slice.*.err >&2
    return "$_rc"
  fi
  cat "$_out".slice.[0-9][0-9][0-9].01 > "$_out"
  rm -f "$_out".slice.*
}

# pd_count_diff A B: number of records (lines) that differ.
pd_count_diff() {
  paste -d ' ' "$1" "$2" | awk '$1 != $2 { n++ } END { print n + 0 }'
}
