#!/bin/sh
# slow: sleeps SECONDS (an int, 0 to 86400), then says so. For watching a call outlive a
# broken path: break the link while it sleeps and the result comes back by dtn.
set -eu
seconds=$1
case $seconds in
'' | *[!0-9]*)
    echo "slow: SECONDS must be a whole number, not '$seconds'" >&2
    exit 2
    ;;
esac
if [ "${#seconds}" -gt 5 ] || [ "$seconds" -gt 86400 ]; then
    echo "slow: at most 86400 seconds, not $seconds" >&2
    exit 2
fi
sleep "$seconds"
printf 'slept %s s on %s\n' "$seconds" "$(uname -n)"
