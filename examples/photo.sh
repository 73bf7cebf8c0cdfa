#!/bin/sh
# photo: "takes a picture" of SIZE x SIZE pixels (an int, 1 to 1000), returned as a file.
#
# Writes photo.pgm (a plain greyscale PGM with a deterministic pattern, so the same SIZE always
# gives the same bytes) into $FERRY_OUTPUT_DIR, which the daemon sends back as a file result,
# and prints a one-line description, which is the call's value.
set -eu
size=$1
case $size in
'' | *[!0-9]*)
    echo "photo: SIZE must be a whole number of pixels, not '$size'" >&2
    exit 2
    ;;
esac
if [ "${#size}" -gt 4 ] || [ "$size" -lt 1 ] || [ "$size" -gt 1000 ]; then
    echo "photo: SIZE must be 1 to 1000, not $size" >&2
    exit 2
fi
out="$FERRY_OUTPUT_DIR/photo.pgm"
awk -v n="$size" 'BEGIN {
    print "P2"
    print n, n
    print 255
    for (y = 0; y < n; y++) {
        line = ""
        for (x = 0; x < n; x++) {
            # diagonal stripes over a checkerboard
            v = (x * 7 + y * 13) % 128 + (int(x / 8) + int(y / 8)) % 2 * 127
            line = line (x % 16 == 0 ? "" : " ") v
            if (x % 16 == 15 || x == n - 1) { print line; line = "" }
        }
    }
}' >"$out"
bytes=$(wc -c <"$out" | tr -d ' ')
printf 'photo.pgm: %sx%s greyscale, %s bytes\n' "$size" "$size" "$bytes"
