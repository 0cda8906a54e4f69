# Flow fidelity's cost against the cluster size (docs/flow.md, "Cost growth"): wall time and peak
# memory from bench/flow_scale.sh's table (columns: GPUs, wall s, peak MiB, ...; its header line
# is skipped), optionally beside an earlier table (`before`, `beforetitle`), with the scale
# issue's time targets.
#   gnuplot -e "datafile='now.txt'; before='old.txt'; beforetitle='...'; out='flow-scale.png'; fmt='png'; plottitle='Llama 3 405B'" plots/flow_scale.gp
if (!exists("fmt")) fmt = 'png'
if (fmt eq 'svg') { set terminal svg size 1000,460 dynamic font 'sans,11' } else { set terminal pngcairo size 1000,460 font 'sans,10' }
set output out
set termoption noenhanced
if (!exists("before")) before = ''
if (!exists("beforetitle")) beforetitle = 'before'
set multiplot layout 1,2 title sprintf("%s: flow fidelity cost against GPUs (2 cores)", plottitle)
set logscale xy
set grid
set key left top Left reverse font ',9'
set xrange [700:200000]
set xlabel 'GPUs'
set ylabel 'wall time (s)'
set xtics ('1K' 1024, '4K' 4096, '16K' 16384, '64K' 65536, '128K' 131072)
set title 'time'
plot datafile every ::1 using 1:2 with linespoints lw 2 pt 7 title 'now', \
     (before ne '' ? before : datafile) every ::1 using 1:(before ne '' ? $2 : NaN) with linespoints lw 2 pt 5 dt 2 title beforetitle, \
     '-' using 1:2 with points pt 2 ps 2 lc rgb 'red' title 'targets (16K 1 s, 64K 4 s, 128K 10 s)'
16384 1
65536 4
131072 10
e
set title 'peak memory'
set ylabel 'peak RSS (MiB)'
plot datafile every ::1 using 1:3 with linespoints lw 2 pt 7 title 'now', \
     (before ne '' ? before : datafile) every ::1 using 1:(before ne '' ? $3 : NaN) with linespoints lw 2 pt 5 dt 2 title beforetitle, \
     '-' using 1:2 with points pt 2 ps 2 lc rgb 'red' title 'target (128K 4 GiB)'
131072 4096
e
unset multiplot
