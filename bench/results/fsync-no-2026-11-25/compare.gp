set terminal png size 1200,900
set output 'compare.png'
set multiplot layout 2,1 title 'zklock vs Curator, kazoo, raw C client (forceSync=no)'
set style data histogram
set style histogram cluster gap 1
set style fill solid border -1
set xtics rotate by -20
set key top left
set ylabel 'lock cycles/s'
plot 'compare.dat' using 2:xtic(1) title 'zklock', '' using 4 title 'curator', '' using 6 title 'kazoo', '' using 8 title 'raw C'
set ylabel 'p99 acquire latency (ms)'
set logscale y
plot 'compare.dat' using 3:xtic(1) title 'zklock', '' using 5 title 'curator', '' using 7 title 'kazoo', '' using 9 title 'raw C'
unset multiplot
