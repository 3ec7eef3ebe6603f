from mt.cli import main

main()
