"""Static hazard checker: rules over a libcst model of the code (distdoctor/check/rules/), before launch."""
