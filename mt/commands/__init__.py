"""What mt translate, info, plot and distill do behind the command line (mt/cli/)."""
