# Memory per GPU stacked by state for each sweep point (or plan layout), with the GPU's capacity.
# gnuplot -e "datafile='sweep.csv'; xcol='training.micro_batch_size'; out='m.png'; fmt='png'; plottitle='...'" sweep_memory.gp
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
set title sprintf("%s: memory per GPU by %s", plottitle, names(1))
set xlabel names(1)
set ylabel 'memory per GPU (GiB)'
# room above the capacity line and above the tallest bar (a sweep may hold points that do not fit)
stats datafile using (column('memory_gib.capacity')):(column('memory_gib.total')) nooutput
set yrange [0:1.12 * (STATS_max_x > STATS_max_y ? STATS_max_x : STATS_max_y)]
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set key outside right
set grid ytics
plot datafile using (column('memory_gib.weights')):xticlabels(lab(1)) title 'weights', \
     '' using (column('memory_gib.gradients')) title 'gradients', \
     '' using (column('memory_gib.optimizer')) title 'optimizer states', \
     '' using (column('memory_gib.activations')) title 'activations', \
     '' using (column('memory_gib.buffers')) title 'buffers', \
     '' using 0:(column('memory_gib.capacity')) with linespoints lw 3 pt 0 lc rgb 'red' title 'GPU capacity'
