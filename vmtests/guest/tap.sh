# TAP helpers for the guest test scripts (sourced; busybox sh). ok/notok number the checks in
# $n and count failures in $fails; each script prints "1..$n" at its end and exits 1 on fails.
n=0
fails=0

ok() {
  n=$((n + 1))
  echo "ok $n - $1"
}

# notok <what> [detail lines...]: the details as TAP comments.
notok() {
  n=$((n + 1))
  fails=$((fails + 1))
  echo "not ok $n - $1"
  shift
  for l in "$@"; do echo "#   $l"; done
}
