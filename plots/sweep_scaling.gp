# Scaling: throughput against GPUs with the ideal (linear from the first point) line, and the
# scaling efficiency in %. Use on a sweep whose first --vary changes the GPU count (e.g.
# parallel.data_parallel_size; weak scaling when the batch grows with it, strong when it does not).
if (fmt eq 'svg') { set terminal svg size 900,560 dynamic font 'sans,11' } else { set terminal pngcairo size 900,560 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
set title sprintf("%s: scaling with %s", plottitle, xcol)
set xlabel 'GPUs'
set ylabel 'tokens per second'
set y2label 'scaling efficiency (%)'
set ytics nomirror
set y2tics
set y2range [0:110]
set grid
set key top left
stats datafile using (column('gpus')):(column('tokens_per_s')) nooutput
g0 = STATS_min_x
t0 = STATS_min_y
plot datafile using (column('gpus')):(column('tokens_per_s')) with linespoints lw 2 pt 7 title 'simulated', \
     '' using (column('gpus')):(t0 * column('gpus') / g0) with lines dt 2 lw 2 title 'ideal (linear)', \
     '' using (column('gpus')):(100 * column('tokens_per_s') / (t0 * column('gpus') / g0)) axes x1y2 \
        with linespoints pt 5 title 'efficiency (%)'
