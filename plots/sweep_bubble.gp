# Pipeline bubble against micro-batches per pipeline m, with the closed form (p-1)/(m+p-1)
# ((p-1)/(v m+p-1) when vpp=v > 1: interleaved).
# m comes from the varied column x: m = x / per (x a global batch, per = micro-batch x DP),
# or m = per / x when inv=1 (x a micro-batch size, per = global batch / DP).
# gnuplot -e "datafile='sweep.csv'; xcol='training.global_batch_size'; out='b.png'; fmt='png'; plottitle='...'; stages=8; per=16; inv=0" sweep_bubble.gp
if (fmt eq 'svg') { set terminal svg size 1100,560 dynamic font 'sans,11' } else { set terminal pngcairo size 1100,560 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
if (!exists("inv")) inv = 0
if (!exists("nz")) nz = 1
if (!exists("zvals")) zvals = ''
tag(j) = nz > 1 ? sprintf(' (%s)', word(zvals, j)) : ''
# with more than one --vary, one line per combination of the others (every nz-th row from j)
if (!exists("vpp")) vpp = 1
m(x) = inv ? per / x : x / per
set title sprintf("%s: pipeline bubble vs micro-batches (p = %d stages)", plottitle, stages)
set xlabel 'micro-batches per pipeline per step, m'
set ylabel 'bubble (% of the step)'
set logscale x 2
set grid
set key outside right top vertical
ideal(m) = 100.0 * (stages - 1) / (vpp * m + stages - 1)
plot for [j=1:nz] datafile every nz::(j-1) using (m(column(xcol))):(100 * column('bubble_fraction.mean')) \
        smooth unique with linespoints lw 2 pt 7 lc j title 'simulated, mean over stages'.tag(j), \
     for [j=1:nz] datafile every nz::(j-1) using (m(column(xcol))):(100 * column('bubble_fraction.max')) \
        with points pt 6 lc j title 'simulated, worst stage'.tag(j), \
     [1:*] ideal(x) with lines dt 2 lw 2 title (vpp > 1 ? sprintf('(p-1)/(v m+p-1), v = %d: interleaved', vpp) : '(p-1)/(m+p-1): GPipe / 1F1B')
