//! What this machine is like now, for the RPC predicates: battery, free disk and memory, load.
