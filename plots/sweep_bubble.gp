# Pipeline bubble against micro-batches per pipeline, with the closed form (p-1)/(m+p-1).
# gnuplot -e "datafile='sweep.csv'; xcol='training.global_batch_size'; out='b.png'; fmt='png'; plottitle='...'; stages=8; per=16" sweep_bubble.gp
# per: sequences per micro-batch x DP (so m = x / per); stages: pipeline stages p.
if (fmt eq 'svg') { set terminal svg size 900,560 dynamic font 'sans,11' } else { set terminal pngcairo size 900,560 font 'sans,10' }
set output out
set termoption noenhanced
set datafile separator ','
set datafile columnheaders
set title sprintf("%s: pipeline bubble vs micro-batches (p = %d)", plottitle, stages)
set xlabel 'micro-batches per pipeline, m'
set ylabel 'bubble fraction of the step (%)'
set grid
set key top right
ideal(m) = 100.0 * (stages - 1) / (m + stages - 1)
plot datafile using (column(xcol) / per):(100 * column('bubble_fraction.mean')) with linespoints lw 2 pt 7 title 'simulated (mean over stages)', \
     [1:*] ideal(x) with lines dt 2 lw 2 title '(p-1)/(m+p-1)'
