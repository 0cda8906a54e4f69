# Step-time breakdown per sweep point: compute, exposed TP / PP / DP / ZeRO communication and
# pipeline bubble, stacked (seconds). Also used by the plan report, one bar per layout.
# gnuplot -e "datafile='sweep.csv'; xcol='parallel.data_parallel_size'; out='b.png'; fmt='png'; plottitle='...'" sweep_breakdown.gp
# optional: labelcols (columns joined into each bar's label, default xcol)
if (fmt eq 'svg') { set terminal svg size 1000,600 dynamic font 'sans,11' } else { set terminal pngcairo size 1000,600 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
if (!exists("labelcols")) labelcols = xcol
lab(i) = strcol(word(labelcols, i)) . (i < words(labelcols) ? ' / ' . lab(i + 1) : '')
names(i) = word(labelcols, i) . (i < words(labelcols) ? ' / ' . names(i + 1) : '')
if (words(labelcols) > 1 || exists("rotate")) set xtics rotate by -35 left
set title sprintf("%s: where a step's time goes, by %s", plottitle, names(1))
set xlabel names(1)
set ylabel 'time per step (s)'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set key outside right
set grid ytics
bubble(s) = column('bubble_fraction.mean') * column('step_time_s')
# in parentheses: the macro is subtracted as a whole
exposed = "(column('comm_s.tp.exposed') + column('comm_s.pp.exposed') + column('comm_s.dp.exposed') + column('comm_s.zero.exposed'))"
plot datafile using (column('step_time_s') - @exposed - bubble(0)):xticlabels(lab(1)) title 'compute', \
     '' using (column('comm_s.tp.exposed')) title 'TP comm (exposed)', \
     '' using (column('comm_s.pp.exposed')) title 'PP comm (exposed)', \
     '' using (column('comm_s.dp.exposed')) title 'DP comm (exposed)', \
     '' using (column('comm_s.zero.exposed')) title 'ZeRO comm (exposed)', \
     '' using (bubble(0)) title 'pipeline bubble'
