# Scaling: throughput against GPUs with the ideal line (linear from the smallest point), and
# the scaling efficiency and MFU in %. Drawn by dtsim sweep --plot when the GPU count changes
# between points (e.g. parallel.data_parallel_size; weak scaling when the batch grows with it).
# gnuplot -e "datafile='sweep.csv'; xcol='parallel.data_parallel_size'; out='s.png'; fmt='png'; plottitle='...'" sweep_scaling.gp
if (fmt eq 'svg') { set terminal svg size 1100,560 dynamic font 'sans,11' } else { set terminal pngcairo size 1100,560 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
set title sprintf("%s: scaling with %s", plottitle, xcol)
set xlabel 'GPUs'
set ylabel 'throughput (tokens/s)'
set y2label 'scaling efficiency and MFU (%)'
set ytics nomirror
set y2tics
set y2range [0:110]
set grid
set key outside right top vertical
stats datafile using (column('gpus')):(column('tokens_per_s')) nooutput
g0 = STATS_min_x
t0 = STATS_min_y
# t0 is the smallest throughput, the one of the fewest GPUs when throughput grows with GPUs.
# smooth unique: lines in GPU order, whatever the order the points were swept in
plot datafile using (column('gpus')):(column('tokens_per_s')) smooth unique with linespoints lw 2 pt 7 title 'simulated tokens/s', \
     '' using (column('gpus')):(t0 * column('gpus') / g0) smooth unique with lines dt 2 lw 2 title 'ideal (linear)', \
     '' using (column('gpus')):(100 * column('tokens_per_s') / (t0 * column('gpus') / g0)) smooth unique axes x1y2 \
        with linespoints pt 5 title 'scaling efficiency (%)', \
     '' using (column('gpus')):(100 * column('mfu')) smooth unique axes x1y2 with linespoints pt 9 dt 3 title 'MFU (%)'
