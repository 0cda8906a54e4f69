# Throughput (tokens/s) and MFU against the first varied value of a dtsim sweep; with more
# than one --vary, one line per combination of the others (rows come in odometer order, so
# series j is every nz-th row from j).
# gnuplot -e "datafile='sweep.csv'; xcol='training.micro_batch_size'; out='x.png'; fmt='png'; plottitle='...'" sweep_throughput.gp
# optional: nz (series count), zvals (their labels, space-separated), xnumeric (0: x is text),
# xticks (the swept values, comma-separated: a tick at each), xlog (1: log2 x axis)
# A numeric x is drawn in its own order (smooth unique sorts each line by x), whatever the
# order the values were swept in.
if (fmt eq 'svg') { set terminal svg size 1100,560 dynamic font 'sans,11' } else { set terminal pngcairo size 1100,560 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
if (!exists("nz")) nz = 1
if (!exists("zvals")) zvals = ''
if (!exists("xnumeric")) xnumeric = 1
xspec = xnumeric ? "(column(xcol))" : "0"
xtl = xnumeric ? "" : ":xticlabels(strcol(xcol))"
sorted = xnumeric ? "smooth unique" : ""
if (!exists("xlog")) xlog = 0
if (xnumeric && xlog) set logscale x 2
if (xnumeric && exists("xticks") && strlen(xticks) > 0) eval("set xtics (".xticks.")")
set title sprintf("%s: throughput and MFU vs %s", plottitle, xcol)
set xlabel xcol
set ylabel 'throughput (tokens/s)'
set y2label 'MFU (% of peak)'
set ytics nomirror
set y2tics
set grid
set key outside right top vertical
tag(j) = nz > 1 ? sprintf(' (%s)', word(zvals, j)) : ''
plot for [j=1:nz] datafile every nz::(j-1) using @xspec:(column('tokens_per_s'))@xtl @sorted with linespoints lw 2 pt 7 lc j \
        title 'tokens/s'.tag(j), \
     for [j=1:nz] datafile every nz::(j-1) using @xspec:(100 * column('mfu'))@xtl @sorted axes x1y2 with linespoints lw 2 \
        pt 5 dt 2 lc j title 'MFU'.tag(j)
