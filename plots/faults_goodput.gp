# Goodput against checkpoint interval (dtsim faults --plot), with the optimum and Young/Daly.
if (fmt eq 'svg') { set terminal svg size 900,560 dynamic font 'sans,11' } else { set terminal pngcairo size 900,560 font 'sans,10' }
set output out
set termoption noenhanced
set title sprintf("%s: goodput vs checkpoint interval", plottitle)
set xlabel 'checkpoint interval (s, log scale)'
set ylabel 'goodput (% of wall time training)'
set logscale x
set grid
set key bottom center
set arrow 1 from optimum, graph 0 to optimum, graph 1 nohead dt 2 lc rgb 'dark-green'
set arrow 2 from youngdaly, graph 0 to youngdaly, graph 1 nohead dt 3 lc rgb 'red'
set label 1 sprintf('optimum %.0f s', optimum) at optimum, graph 0.95 offset 1,0 tc rgb 'dark-green'
set label 2 sprintf('Young/Daly %.0f s', youngdaly) at youngdaly, graph 0.88 offset 1,0 tc rgb 'red'
plot datafile using 1:(100 * $2) with linespoints lw 2 pt 7 title 'mean goodput (Monte Carlo)'
