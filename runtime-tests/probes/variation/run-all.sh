#!/bin/sh
# The variation probe set: every program prints what a host could leak into its output, one
# "KEY: VALUE" line each. Run from a directory holding input/; $1 is this directory.
P=$1
bash "$P/probe.sh"
python3 "$P/probe.py"
perl "$P/probe.pl"
"$P/probe-static"
"$P/probe-go"
