"""Code shared by the benchmark entry points, and the parts they dispatch to."""
