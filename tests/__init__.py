"""mt's tests: a folder per package of mt/ (commands/ also holds the command line's), faults/ for what every
command does with bad input and failing outputs, and here the top-level modules' and the whole project's."""
