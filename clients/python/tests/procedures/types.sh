#!/bin/sh
# types: prints each argument as the server got it, separated by '|' (int, float, bool, text).
set -eu
printf '%s|' "$@"
