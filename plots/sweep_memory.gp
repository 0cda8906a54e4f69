# Memory per GPU stacked by state for each sweep point, with the GPU's capacity.
if (fmt eq 'svg') { set terminal svg size 900,560 dynamic font 'sans,11' } else { set terminal pngcairo size 900,560 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
set title sprintf("%s: memory per GPU by %s", plottitle, xcol)
set xlabel xcol
set ylabel 'GiB per GPU'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set key outside right
set grid ytics
plot datafile using (column('memory_gib.weights')):xticlabels(stringcolumn(xcol)) title 'weights', \
     '' using (column('memory_gib.gradients')) title 'gradients', \
     '' using (column('memory_gib.optimizer')) title 'optimizer states', \
     '' using (column('memory_gib.activations')) title 'activations', \
     '' using (column('memory_gib.buffers')) title 'buffers', \
     '' using 0:(column('memory_gib.capacity')) with lines lw 3 lc rgb 'red' title 'capacity'
