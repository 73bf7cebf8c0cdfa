#!/bin/sh
# sum: adds its int parameters and prints the total.
#
# Each argument is checked to be a plain integer before it goes near shell arithmetic (an
# unchecked "$((...))" would evaluate whatever expression the caller sent).
set -eu
total=0
for n in "$@"; do
    case $n in
    '' | - | *[!0-9-]* | ?*-*)
        echo "sum: '$n' is not an integer" >&2
        exit 2
        ;;
    esac
    if [ "${#n}" -gt 15 ]; then
        echo "sum: $n is too large for this example" >&2
        exit 2
    fi
    # no leading zeros: shell arithmetic would read 010 as octal
    sign=
    case $n in -*) sign=- n=${n#-} ;; esac
    while [ "${#n}" -gt 1 ] && [ "${n#0}" != "$n" ]; do n=${n#0}; done
    total=$((total + $sign$n))
done
printf '%s\n' "$total"
