//! Benchmarks that put Ferry beside another system measured in the same run: today the RPC
//! benchmark against a gRPC (tonic) echo (`cargo bench -p ferry-bench --bench rpc`; what it
//! measures and its settings are in `benches/rpc.rs`'s header).
//!
//! The library is empty on purpose: the crate exists so that gRPC's dependencies (tonic, prost,
//! hyper's HTTP/2) are compiled only for this benchmark, never for the daemon's tests.
