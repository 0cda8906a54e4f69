# A Gantt chart of one step for a report: a block of rows per pipeline stage (its lanes, and the
# TP/CP/EP communication inside its compute tasks), a bar per task.
# Input: the data file `plots/timeline.sh TRACE.json` writes (stage lane start_ms end_ms kind);
# optional: stages (the blocks to draw, default 8).
if (fmt eq 'svg') { set terminal svg size 1200,500 dynamic font 'sans,11' } else { set terminal pngcairo size 1200,500 font 'sans,10' }
set output out
set termoption noenhanced
set title sprintf("%s: one step, by pipeline stage", plottitle)
set xlabel 'time (ms)'
set ylabel ''
# a block of rows per stage: its lanes (compute, comm, pipeline send, host) and the TP/CP/EP
# communication inside compute tasks, then a gap; labelled by stage
if (!exists("stages")) stages = 8
rows = 6
set yrange [stages * rows - 1.5:-0.5]
set ytics () scale 0
do for [s = 0:stages - 1] {
    set ytics add (sprintf("stage %d", s) s * rows + 2)
}
set grid xtics
set style fill solid 0.9
set key outside right
# colours by kind: 0 compute, 1 tp, 2 pp, 3 dp, 4 zero, 5 bubble
kindcolor(k) = k == 0 ? 0x4477aa : k == 1 ? 0x66ccee : k == 2 ? 0x228833 : k == 3 ? 0xccbb44 : k == 4 ? 0xee6677 : 0xdddddd
plot datafile using ($3):($1 * rows + $2):($3):($4):($1 * rows + $2 - 0.4):($1 * rows + $2 + 0.4):(kindcolor($5)) \
     with boxxyerror lc rgb variable notitle, \
     NaN with boxes lc rgb '#4477aa' title 'compute', NaN with boxes lc rgb '#66ccee' title 'TP comm (inside compute)', \
     NaN with boxes lc rgb '#228833' title 'pipeline send', \
     NaN with boxes lc rgb '#ccbb44' title 'DP comm', NaN with boxes lc rgb '#ee6677' title 'ZeRO comm', \
     NaN with boxes lc rgb '#dddddd' title 'bubble / wait'
