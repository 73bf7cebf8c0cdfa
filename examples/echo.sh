#!/bin/sh
# echo: prints its one text parameter back, byte for byte.
#
# The daemon runs this file by argv, never through a shell command line: "$1" is the caller's
# text exactly as sent (quotes, $(...), ; and all), and printf '%s' neither interprets escapes
# nor adds a newline.
set -eu
printf '%s' "$1"
