#!/bin/bash
# run.sh I TAG: one closed-loop CPU-only run (target CPU 0.4 from 10 to 50 s) with the recorder at interval I
# Setup in $VB: `ats record --save-baseline B --cpu-only`; `ats trace synth --out t.h5 --duration 60 --cpu step:10=0.4,50=1`.
# Prints the recorder's error in the CPU 0.4 segment (`ats trace compare --margin 5`). ATS: the ats binary.
cd "${VB:-/tmp/vb}"; A=${ATS:-ats}; I=$1; T=$2
$A stress --trace t.h5 --baseline B --cpu-only --log ctl-$T.csv > s-$T.txt 2>&1 &
sp=$!
$A record --baseline B --cpu-only --duration 58 --interval $I --out r-$T.h5 > rec-$T.txt 2>&1
wait $sp
e=$($A trace compare r-$T.h5 t.h5 --margin 5 | awk '$1=="cpu" && $4=="0.4000" {print $6}')
echo "$T interval $I cpu-0.4 err $e"
