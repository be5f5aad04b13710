"""Models: offline baselines and API providers behind one interface, the rate limiter,
and the attempt store. The only package that talks to the network."""
