# Step-time breakdown per sweep point: compute, exposed TP / PP / DP / ZeRO communication and
# pipeline bubble, stacked (seconds).
if (fmt eq 'svg') { set terminal svg size 900,560 dynamic font 'sans,11' } else { set terminal pngcairo size 900,560 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
set title sprintf("%s: where a step's time goes, by %s", plottitle, xcol)
set xlabel xcol
set ylabel 'seconds per step'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set key outside right
set grid ytics
bubble(s) = column('bubble_fraction.mean') * column('step_time_s')
exposed = "column('comm_s.tp.exposed') + column('comm_s.pp.exposed') + column('comm_s.dp.exposed') + column('comm_s.zero.exposed')"
plot datafile using (column('step_time_s') - @exposed - bubble(0)):xticlabels(stringcolumn(xcol)) title 'compute', \
     '' using (column('comm_s.tp.exposed')) title 'TP comm (exposed)', \
     '' using (column('comm_s.pp.exposed')) title 'PP comm (exposed)', \
     '' using (column('comm_s.dp.exposed')) title 'DP comm (exposed)', \
     '' using (column('comm_s.zero.exposed')) title 'ZeRO comm (exposed)', \
     '' using (bubble(0)) title 'pipeline bubble'
