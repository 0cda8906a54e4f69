# Throughput (tokens/s) and MFU against the first varied value of a dtsim sweep.
# gnuplot -e "datafile='sweep.csv'; xcol='parallel.data_parallel_size'; out='x.png'; fmt='png'; plottitle='...'" sweep_throughput.gp
if (fmt eq 'svg') { set terminal svg size 900,560 dynamic font 'sans,11' } else { set terminal pngcairo size 900,560 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
set title sprintf("%s: throughput and MFU vs %s", plottitle, xcol)
set xlabel xcol
set ylabel 'tokens per second'
set y2label 'MFU (%)'
set ytics nomirror
set y2tics
set grid
set key top left
plot datafile using (column(xcol)):(column('tokens_per_s')) with linespoints lw 2 pt 7 title 'tokens/s', \
     '' using (column(xcol)):(100 * column('mfu')) axes x1y2 with linespoints lw 2 pt 5 dt 2 title 'MFU (%)'
